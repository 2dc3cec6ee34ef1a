"""CodeBuddy as its users of the original have it: a config folder named by ``CODEBUDDY_CONFIG_DIR``,
MCP servers in whichever file the CLI reads, and the DSH-era leftovers the original cleaned up.

Measured on the CodeBuddy Code CLI 2.117.0 (``@tencent-ai/agent-sdk@0.3.201``): its config folder
is ``$CODEBUDDY_CONFIG_DIR``, else ``~/.codebuddy``; its user MCP servers come from the first of
``.mcp.json`` and ``mcp.json`` in that folder that exists. The original wrote ``mcp.json``: a user
with servers of their own there would lose all of them from CodeBuddy the moment a ``.mcp.json``
appeared next to it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memself.install.entries import SERVER_NAME
from memself.install.model_prep import ModelReady
from memself.install.setup_flow import SetupOptions, run_setup
from memself.paths import DataPaths

OTHER = {"type": "stdio", "command": "/usr/bin/other-server", "args": []}
# The DSH-era server the original removed by its name wherever it registered its own.
DSH = {"type": "stdio", "command": "/usr/local/bin/node", "args": ["/Users/dev/dsh-memory/lib/index.js"]}


class _Lines(list):
    def __call__(self, line: str) -> None:
        self.append(line)

    @property
    def text(self) -> str:
        return "\n".join(self)


class _NoQuestions:
    def ask(self, question: str, default: str = "") -> str:
        raise AssertionError(question)

    secret = ask

    def confirm(self, question: str, default: bool) -> bool:
        raise AssertionError(question)


def _setup(home: Path, only: str | None = "codebuddy") -> _Lines:
    out = _Lines()
    code = run_setup(
        SetupOptions(only=only),
        _NoQuestions(),
        out,
        home=home,
        prepare=lambda model, echo: ModelReady(model, False),
    )
    assert code == 0, out.text
    return out


def _json(path: Path) -> dict:
    return json.loads(path.read_text("utf-8"))


@pytest.fixture(autouse=True)
def _no_config_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CODEBUDDY_CONFIG_DIR", raising=False)


def test_codebuddy_config_dir_is_where_its_files_go(
    isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = isolated_home / "work" / "cb-config"
    folder.mkdir(parents=True)
    monkeypatch.setenv("CODEBUDDY_CONFIG_DIR", str(folder))
    out = _setup(isolated_home, only=None)  # detected there, without ~/.codebuddy
    assert sorted(_json(folder / "settings.json")["hooks"]) == ["SessionStart", "Stop", "UserPromptSubmit"]
    assert SERVER_NAME in _json(folder / ".mcp.json")["mcpServers"]
    assert (folder / "skills" / "memory-self-evolution-manage" / "SKILL.md").is_file()
    assert not (isolated_home / ".codebuddy").exists()
    assert str(folder / "settings.json") in out.text


def test_workbuddys_folder_in_the_variable_is_not_taken_for_codebuddy(
    isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """WorkBuddy runs its embedded engine with CODEBUDDY_CONFIG_DIR=~/.workbuddy: a setup run from
    there must not register CodeBuddy's hooks into WorkBuddy's settings (every prompt twice)."""
    (isolated_home / ".workbuddy").mkdir()
    monkeypatch.setenv("CODEBUDDY_CONFIG_DIR", str(isolated_home / ".workbuddy"))
    _setup(isolated_home)
    assert (isolated_home / ".codebuddy" / "settings.json").is_file()
    hooks = (
        json.dumps(_json(isolated_home / ".workbuddy" / "settings.json"))
        if (isolated_home / ".workbuddy" / "settings.json").exists()
        else ""
    )
    assert "--agent codebuddy" not in hooks


def test_mcp_goes_into_the_file_the_cli_reads(isolated_home: Path) -> None:
    """Only ``mcp.json`` there (the original's choice, with the user's own servers): register in it
    and do not create ``.mcp.json``, which the CLI would read instead."""
    folder = isolated_home / ".codebuddy"
    folder.mkdir()
    (folder / "mcp.json").write_text(json.dumps({"mcpServers": {"other": OTHER, "dsh-memory": DSH}}), "utf-8")
    _setup(isolated_home)
    assert not (folder / ".mcp.json").exists()
    servers = _json(folder / "mcp.json")["mcpServers"]
    assert list(servers) == ["other", SERVER_NAME]  # the user's server kept, the DSH one gone


def test_with_both_files_the_dot_file_is_the_one_and_dsh_memory_goes_from_both(isolated_home: Path) -> None:
    folder = isolated_home / ".codebuddy"
    folder.mkdir()
    (folder / ".mcp.json").write_text(json.dumps({"mcpServers": {"other": OTHER}}), "utf-8")
    (folder / "mcp.json").write_text(json.dumps({"mcpServers": {"dsh-memory": DSH}}), "utf-8")
    _setup(isolated_home)
    assert list(_json(folder / ".mcp.json")["mcpServers"]) == ["other", SERVER_NAME]
    assert _json(folder / "mcp.json")["mcpServers"] == {}


def test_setup_moves_the_old_dsh_memory_folder_as_the_original_did(isolated_home: Path) -> None:
    old = isolated_home / ".dsh-memory"
    old.mkdir()
    (old / "rule.jsonl").write_text('{"id":"mem-1","text":"回答一律使用中文","confidence":0.8}\n', "utf-8")
    paths = DataPaths.default()
    assert paths.root == isolated_home / ".memory-self-evolution" and not paths.root.exists()
    out = _setup(isolated_home)
    assert not old.exists()
    assert (paths.root / "rule.jsonl").read_text("utf-8").startswith('{"id":"mem-1"')
    assert f"已把 {old} 迁到 {paths.root}" in out.text


def test_the_old_folder_is_left_alone_when_the_new_one_exists(isolated_home: Path) -> None:
    old = isolated_home / ".dsh-memory"
    old.mkdir()
    DataPaths.default().ensure()
    _setup(isolated_home)
    assert old.is_dir()
