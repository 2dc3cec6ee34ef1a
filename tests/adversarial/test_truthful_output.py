"""setup, uninstall and doctor say only what they did or found.

A new user's uninstall said it removed Claude's permission rule for memory_resolve, which setup
had never added, and listed embeddings.jsonl and verify-cases.json as kept when neither existed.
Each test lays real files in a fake HOME, runs the flow, and holds every claim in the output
against the files.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memself.doctor import check_data
from memself.install.entries import RESOLVE_RULE
from memself.install.model_prep import ModelReady
from memself.install.setup_flow import SetupOptions, run_setup
from memself.install.uninstall import run_uninstall
from memself.paths import DataPaths
from tests.test_installers_claude import FAKE_CLAUDE

SKILL = Path(__file__).parents[1] / "fixtures" / "installers" / "_skill" / "memory-self-evolution-manage"


class Recorder:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, line: str) -> None:
        self.lines.append(line)

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


class NoQuestions:
    def ask(self, question: str, default: str = "") -> str:
        raise AssertionError(question)

    def secret(self, question: str) -> str:
        raise AssertionError(question)

    def confirm(self, question: str, default: bool) -> bool:
        raise AssertionError(question)


class Answers(NoQuestions):
    """A terminal user: popup mode, skip the judge API, and the permission answer given."""

    def __init__(self, allow: bool) -> None:
        self.allow = allow

    def ask(self, question: str, default: str = "") -> str:
        return "skip" if "baseUrl" in question else default

    def confirm(self, question: str, default: bool) -> bool:
        return self.allow


def ready(model: str, echo: object) -> ModelReady:
    # Not under test here: preparing the model (tests/test_installers_setup covers it).
    return ModelReady(model, False)


@pytest.fixture
def claude_home(isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home with Claude Code installed and a stand-in ``claude`` CLI."""
    import sys

    (isolated_home / ".claude").mkdir()
    script = isolated_home / "bin" / "claude"
    script.parent.mkdir()
    script.write_text(FAKE_CLAUDE.format(python=sys.executable))
    script.chmod(0o755)
    monkeypatch.setenv("MEMORY_CLAUDE_BIN", str(script))
    return isolated_home


def setup_claude(home: Path, prompter: object = None, interactive: bool = False) -> Recorder:
    out = Recorder()
    opts = SetupOptions(interactive=interactive) if interactive else SetupOptions(only="claude")
    code = run_setup(opts, prompter or NoQuestions(), out, home=home, skill_source=SKILL, prepare=ready)
    assert code == 0, out.text
    return out


def settings_allow(home: Path) -> list[str]:
    data = json.loads((home / ".claude" / "settings.json").read_text(encoding="utf-8"))
    return list(data.get("permissions", {}).get("allow", []))


def test_uninstall_names_the_permission_rule_only_when_it_was_there(claude_home: Path) -> None:
    setup_claude(claude_home)
    assert RESOLVE_RULE not in settings_allow(claude_home)
    out = Recorder()
    assert run_uninstall("claude", False, out, home=claude_home) == 0
    assert RESOLVE_RULE not in out.text, out.text
    assert "hook" in out.text


def test_uninstall_names_the_permission_rule_it_removed(claude_home: Path) -> None:
    setup_claude(claude_home, Answers(allow=True), interactive=True)
    assert RESOLVE_RULE in settings_allow(claude_home)
    out = Recorder()
    assert run_uninstall("claude", False, out, home=claude_home) == 0
    assert RESOLVE_RULE in out.text, out.text


def test_setup_does_not_claim_to_remove_a_rule_that_is_not_there(claude_home: Path) -> None:
    out = setup_claude(claude_home, Answers(allow=False), interactive=True)
    assert RESOLVE_RULE not in settings_allow(claude_home)
    assert not [line for line in out.lines if "去掉免批准规则" in line], out.text


def test_uninstall_lists_only_kept_files_that_exist(claude_home: Path) -> None:
    setup_claude(claude_home)
    paths = DataPaths.default()
    paths.ensure()
    (paths.root / "rule.jsonl").write_text("", encoding="utf-8")
    (paths.root / "config.json").write_text("{}\n", encoding="utf-8")
    out = Recorder()
    assert run_uninstall(None, False, out, home=claude_home) == 0
    kept = [line for line in out.lines if "保留" in line]
    assert kept and "rule.jsonl" in kept[0], out.text
    for absent in ("embeddings.jsonl", "verify-cases.json", "project.jsonl", "trash.jsonl", "index/"):
        assert not (paths.root / absent.rstrip("/")).exists()
        assert absent not in out.text, out.text
    assert "已删除 config.json" in out.text


def test_uninstall_with_nothing_installed_claims_nothing(isolated_home: Path) -> None:
    out = Recorder()
    assert run_uninstall(None, False, out, home=isolated_home) == 0
    assert "已删除" not in out.text and "已移除" not in out.text and "已停止" not in out.text, out.text
    assert "保留" not in out.text, out.text
    # No model of ours in the Hugging Face cache: nothing to point out about it.
    assert "Hugging Face" not in out.text, out.text
    assert "重启" not in out.text, out.text


def test_setup_asks_for_a_restart_only_where_something_changed(claude_home: Path) -> None:
    first = setup_claude(claude_home)
    assert "重启 Claude Code" in first.text
    again = setup_claude(claude_home)
    assert "重启" not in again.text, again.text


def test_doctor_names_only_the_memory_files_it_read(isolated_home: Path) -> None:
    paths = DataPaths.default()
    paths.ensure()
    (paths.root / "rule.jsonl").write_text("", encoding="utf-8")
    check = check_data(paths)
    assert check.ok is True
    read, _, missing = check.summary.partition("（")
    assert "rule.jsonl" in read and "project.jsonl" not in read and "trash.jsonl" not in read, check.summary
    assert "project.jsonl" in missing and "trash.jsonl" in missing and "还没有" in missing
