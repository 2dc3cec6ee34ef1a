"""installers/link-memself.sh, which install.sh runs: ``memself`` on PATH the way pipx does it, saying
what it did, never over a file that is not ours, the same on a second run."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "installers" / "link-memself.sh"


@pytest.fixture
def venv_memself(tmp_path: Path) -> Path:
    target = tmp_path / "venv" / "bin" / "memself"
    target.parent.mkdir(parents=True)
    target.write_text("#!/bin/sh\necho memself-here\n")
    target.chmod(0o755)
    return target


def link(home: Path, target: Path, on_path: bool) -> subprocess.CompletedProcess[str]:
    path = "/usr/bin:/bin"
    if on_path:
        path = f"{home / '.local' / 'bin'}:{path}"
    return subprocess.run(
        [str(SCRIPT), str(target)],
        env={"HOME": str(home), "PATH": path, "LANG": "C.UTF-8"},
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def test_link_on_path_then_again(isolated_home: Path, venv_memself: Path) -> None:
    first = link(isolated_home, venv_memself, on_path=True)
    assert first.returncode == 0, first.stderr
    made = isolated_home / ".local" / "bin" / "memself"
    assert made.is_symlink() and os.readlink(made) == str(venv_memself)
    assert first.stdout.strip() == "memself"
    assert "已建立链接" in first.stderr
    second = link(isolated_home, venv_memself, on_path=True)
    assert second.returncode == 0 and second.stdout.strip() == "memself"
    assert "未改动" in second.stderr and "已建立" not in second.stderr
    ran = subprocess.run([str(made)], capture_output=True, text=True, timeout=30, check=True)
    assert ran.stdout.strip() == "memself-here"


def test_not_on_path_names_the_line_to_add(isolated_home: Path, venv_memself: Path) -> None:
    done = link(isolated_home, venv_memself, on_path=False)
    assert done.returncode == 0, done.stderr
    assert (isolated_home / ".local" / "bin" / "memself").is_symlink()
    assert done.stdout.strip() == str(venv_memself)  # until PATH has the folder
    assert 'export PATH="$HOME/.local/bin:$PATH"' in done.stderr


@pytest.mark.parametrize("kind", ["file", "foreign-link"])
def test_someone_elses_memself_is_left_alone(isolated_home: Path, venv_memself: Path, kind: str) -> None:
    bin_dir = isolated_home / ".local" / "bin"
    bin_dir.mkdir(parents=True)
    theirs = bin_dir / "memself"
    if kind == "file":
        theirs.write_text("#!/bin/sh\necho theirs\n")
    else:
        theirs.symlink_to("/opt/other/memself")
    before = os.readlink(theirs) if theirs.is_symlink() else theirs.read_text()
    done = link(isolated_home, venv_memself, on_path=True)
    assert done.returncode == 0, done.stderr
    assert (os.readlink(theirs) if theirs.is_symlink() else theirs.read_text()) == before
    assert "没有覆盖" in done.stderr
    assert done.stdout.strip() == str(venv_memself)
