"""Golden before/after homes for every host installer.

For each host and scenario (an empty home, other tools' hooks and MCP servers, the original Node
plugin registered, a malformed file): install, compare every file of the home with
``after_install/``; install again, nothing changes; uninstall, compare with ``after_uninstall/``,
which is the ``before/`` bytes unless the original plugin's entries were there to be replaced.
Paths of this machine are replaced by placeholders. Regenerate: ``MEMSELF_UPDATE_GOLDEN=1``.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from memself.errors import MemselfError
from memself.hook.command import ENTRY
from memself.install import INSTALLERS
from memself.install.base import InstallContext
from memself.launcher import LAUNCHER

FIXTURES = Path(__file__).parent / "fixtures" / "installers"
SKILL = FIXTURES / "_skill" / "memory-self-evolution-manage"
SCENARIOS = ("empty", "others", "legacy", "malformed")
UPDATE = os.environ.get("MEMSELF_UPDATE_GOLDEN") == "1"
_DATA_DIR = ".memory-self-evolution"


def snapshot(home: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(home)): p.read_bytes()
        for p in sorted(home.rglob("*"))
        if p.is_file() and p.relative_to(home).parts[0] != _DATA_DIR
    }


def normalise(files: dict[str, bytes]) -> dict[str, bytes]:
    python = os.path.abspath(sys.executable).encode()
    return {
        name: data.replace(str(ENTRY).encode(), b"{HOOK_ENTRY}")
        .replace(LAUNCHER.encode(), b"{LAUNCHER}")
        .replace(python, b"{PYTHON}")
        for name, data in files.items()
    }


def load_tree(folder: Path) -> dict[str, bytes]:
    return snapshot(folder) if folder.is_dir() else {}


def check_golden(folder: Path, actual: dict[str, bytes]) -> None:
    if UPDATE:
        shutil.rmtree(folder, ignore_errors=True)
        for name, data in actual.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(data)
        return
    expected = load_tree(folder)
    assert sorted(actual) == sorted(expected), f"files differ from {folder}"
    for name in expected:
        assert actual[name] == expected[name], f"{name} differs from {folder / name}"


def context(home: Path, host: str) -> InstallContext:
    return InstallContext(
        home=home, skill_source=SKILL, claude_bin=None, allow_resolve=True if host == "claude" else None
    )


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("host", sorted(INSTALLERS))
def test_golden_install_uninstall(host: str, scenario: str, isolated_home: Path) -> None:
    home = isolated_home
    installer = INSTALLERS[host]
    case = FIXTURES / host / scenario
    installer.config_root(home).mkdir()
    if (case / "before").is_dir():
        shutil.copytree(case / "before", home, dirs_exist_ok=True)
    before = snapshot(home)
    assert installer.detect(home)
    ctx = context(home, host)

    if scenario == "malformed":
        with pytest.raises(MemselfError, match=r"不是合法的 JSON|不是 JSON 对象"):
            installer.apply(ctx)
        assert snapshot(home) == before, "a malformed file must stop the host before any write"
        with pytest.raises(MemselfError):
            installer.remove(ctx)
        assert snapshot(home) == before
        return

    installer.apply(ctx)
    installed = snapshot(home)
    check_golden(case / "after_install", normalise(installed))

    installer.apply(ctx)
    assert snapshot(home) == installed, "a second install must give identical bytes"

    installer.remove(ctx)
    uninstalled = snapshot(home)
    check_golden(case / "after_uninstall", normalise(uninstalled))
    if scenario != "legacy":
        assert uninstalled == before, "install then uninstall must give the original bytes back"

    installer.remove(ctx)
    assert snapshot(home) == uninstalled, "a second uninstall must change nothing"
