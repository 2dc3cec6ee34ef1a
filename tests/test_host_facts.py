"""Every fact about a host lives in its adapter (``hosts/``): the installers build the hooks they
register from the adapters' tables, and the core names no host."""

from __future__ import annotations

import ast
import json
import re
import shlex
from pathlib import Path
from types import ModuleType

import pytest

from memself.hook.deadline import EMPTY_REPLY_ARG, TIMEOUT_ARG
from memself.hooks.command import ENTRY
from memself.hosts import HOSTS
from memself.hosts.base import EventKind
from memself.installers import INSTALLERS
from memself.installers.base import InstallContext

REPO = Path(__file__).resolve().parent.parent
SKILL = REPO / "tests" / "fixtures" / "installers" / "_skill" / "memory-self-evolution-manage"


def written_hooks(home: Path, host: str) -> dict[str, tuple[int, list[str]]]:
    """event name -> (timeout, command argv) of our hooks in ``host``'s hooks file."""
    installer = INSTALLERS[host]
    path = installer.config_root(home) / installer.hooks_file
    hooks = json.loads(path.read_text(encoding="utf-8"))["hooks"]
    found: dict[str, tuple[int, list[str]]] = {}
    for event, items in hooks.items():
        for item in items:
            for handler in item.get("hooks", [item]):
                if str(ENTRY) in handler["command"]:
                    found[event] = (handler["timeout"], shlex.split(handler["command"]))
    return found


def arg(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


@pytest.mark.parametrize("host", list(HOSTS))
def test_written_hooks_are_the_adapters_table(host: str, isolated_home: Path) -> None:
    adapter = HOSTS[host]
    INSTALLERS[host].apply(InstallContext(home=isolated_home, skill_source=SKILL))
    written = written_hooks(isolated_home, host)
    assert list(written) == list(adapter.EVENT_NAMES.values())
    for kind, name in adapter.EVENT_NAMES.items():
        timeout, argv = written[name]
        assert timeout == adapter.TIMEOUTS[kind]
        # The hook learns the same timeout from its command line.
        assert arg(argv, TIMEOUT_ARG) == str(adapter.TIMEOUTS[kind])
        assert arg(argv, "--agent") == host


@pytest.mark.parametrize("host", list(HOSTS))
def test_changing_the_adapters_table_changes_what_is_installed(
    host: str, isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The adapter's table is the only one: odd names and timeouts put there are what the
    installer writes and what the hook's command line carries, with no second table to agree."""
    adapter: ModuleType = HOSTS[host]  # type: ignore[assignment]
    names = {
        EventKind.SESSION_START: "OddStart",
        EventKind.PROMPT_SUBMIT: "OddPrompt",
        EventKind.STOP: "OddStop",
    }
    timeouts = {EventKind.SESSION_START: 37, EventKind.PROMPT_SUBMIT: 41, EventKind.STOP: 43}
    monkeypatch.setattr(adapter, "EVENT_NAMES", names)
    monkeypatch.setattr(adapter, "TIMEOUTS", timeouts)
    INSTALLERS[host].apply(InstallContext(home=isolated_home, skill_source=SKILL))
    written = written_hooks(isolated_home, host)
    assert {name: timeout for name, (timeout, _) in written.items()} == {
        names[kind]: timeouts[kind] for kind in names
    }
    assert {name: arg(argv, TIMEOUT_ARG) for name, (_, argv) in written.items()} == {
        names[kind]: str(timeouts[kind]) for kind in names
    }
    purpose = INSTALLERS[host].hooks_purpose()
    assert all(name in purpose for name in names.values()), purpose


@pytest.mark.parametrize("host", list(HOSTS))
def test_setup_replaces_the_commands_of_an_older_install(host: str, isolated_home: Path) -> None:
    """Commands registered before they carried the timeout are still ours: replaced in place."""
    from memself.hooks.command import hook_command_line

    installer = INSTALLERS[host]
    ctx = InstallContext(home=isolated_home, skill_source=SKILL)
    older = InstallContext(
        home=isolated_home, skill_source=SKILL, hook_command=lambda name, kind: hook_command_line(name)
    )
    installer.apply(older)
    assert all(TIMEOUT_ARG not in argv for _, argv in written_hooks(isolated_home, host).values())
    installer.apply(ctx)
    path = installer.config_root(isolated_home) / installer.hooks_file
    assert path.read_text(encoding="utf-8").count(str(ENTRY)) == len(HOSTS[host].EVENT_NAMES)
    assert all(TIMEOUT_ARG in argv for _, argv in written_hooks(isolated_home, host).values())


def string_constants(path: Path) -> set[str]:
    return {
        node.value
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }


def test_installers_hold_no_event_name() -> None:
    names = {name for adapter in HOSTS.values() for name in adapter.EVENT_NAMES.values()}
    assert names >= {"UserPromptSubmit", "beforeSubmitPrompt", "stop"}  # the check sees real names
    found = {
        (path.name, text)
        for path in sorted((REPO / "memself" / "installers").glob("*.py"))
        for text in string_constants(path) & names
    }
    assert found == set()


@pytest.mark.parametrize("host", list(HOSTS))
def test_registered_commands_are_recognised_as_ours(host: str) -> None:
    from memself.hooks.command import hook_command_agent, hook_command_line

    for kind in HOSTS[host].EVENT_NAMES:
        line = hook_command_line(host, kind)
        assert hook_command_agent(line) == host
        argv = shlex.split(line)
        assert argv[:6] == shlex.split(hook_command_line(host))
        reply = arg(argv, EMPTY_REPLY_ARG)
        assert reply is None or json.loads(reply) == {}


# --- the core names no host --------------------------------------------------------------------

HOST_WORDS = re.compile(
    r"claude|cursor|codebuddy|workbuddy|askuserquestion|askquestion|ask_followup_question|update_memory",
    re.IGNORECASE,
)
# What must stay, each with why: (file, the exact text it may hold).
ALLOWED = {
    # ``memself config``'s description of showRecall names the one client that shows it.
    ("memself/config.py", "把召回的条目也展示给用户（Claude Code）"),
}


def docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring nodes: text that explains, like comments (which ast drops)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def code_words(tree: ast.AST) -> list[str]:
    """Every identifier and string constant of the code, docstrings aside."""
    skip = docstrings(tree)
    words: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)) and id(node) not in skip:
            value = node.value
            words.append(value.decode("utf-8", "replace") if isinstance(value, bytes) else value)
        elif isinstance(node, ast.Name):
            words.append(node.id)
        elif isinstance(node, ast.Attribute):
            words.append(node.attr)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            words.append(node.name)
        elif isinstance(node, ast.arg):
            words.append(node.arg)
        elif isinstance(node, ast.keyword) and node.arg:
            words.append(node.arg)
        elif isinstance(node, ast.alias):
            words += [node.name, node.asname or ""]
        elif isinstance(node, ast.ImportFrom) and node.module:
            words.append(node.module)
    return words


# Where host facts belong: the adapters, and the installers that write the hosts' files.
NOT_CORE = (REPO / "memself" / "hosts", REPO / "memself" / "installers")


def core_files() -> list[Path]:
    return sorted(
        path
        for path in [*(REPO / "memself").rglob("*.py"), *(REPO / "hooks").glob("*.py")]
        if not any(path.is_relative_to(folder) for folder in NOT_CORE)
    )


def test_the_core_names_no_host() -> None:
    """Host names, their environment variables and their tools appear in ``hosts/`` (and the
    installers) only: the core gets what it needs from the adapter it is handed."""
    assert HOST_WORDS.search("CURSOR_VERSION") and HOST_WORDS.search("AskUserQuestion")
    probe = ast.parse('"""Cursor shows it."""\nX = ("CLAUDE_PROJECT_DIR",)\n# cursor\n')
    assert [w for w in code_words(probe) if HOST_WORDS.search(w)] == ["CLAUDE_PROJECT_DIR"]
    found = {
        (str(path.relative_to(REPO)), word)
        for path in core_files()
        for word in code_words(ast.parse(path.read_text(encoding="utf-8")))
        if HOST_WORDS.search(word)
    }
    assert found - ALLOWED == set()
    assert ALLOWED <= found  # an entry no longer needed is taken out
