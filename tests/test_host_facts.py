"""Every fact about a host lives in its adapter (``hosts/``): the installers build the hooks they
register from the adapters' tables, and the core names no host."""

from __future__ import annotations

import ast
import json
import re
import shlex
import shutil
from pathlib import Path
from types import ModuleType

import pytest

from memself.hook.command import ENTRY
from memself.hook.deadline import EMPTY_REPLY_ARG, TIMEOUT_ARG
from memself.hook.inputs import EVENT_ARG
from memself.hosts import HOSTS
from memself.hosts.base import EventKind
from memself.install import INSTALLERS
from memself.install.base import InstallContext

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
        # The hook learns the same timeout and the event's kind from its command line.
        assert arg(argv, TIMEOUT_ARG) == str(adapter.TIMEOUTS[kind])
        assert arg(argv, EVENT_ARG) == kind.value
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
    assert {name: arg(argv, EVENT_ARG) for name, (_, argv) in written.items()} == {
        names[kind]: kind.value for kind in names
    }
    purpose = INSTALLERS[host].hooks_purpose()
    assert all(name in purpose for name in names.values()), purpose


@pytest.mark.parametrize("host", list(HOSTS))
def test_setup_replaces_the_commands_of_an_older_install(host: str, isolated_home: Path) -> None:
    """Commands registered before they carried the timeout are still ours: replaced in place."""
    from memself.hook.command import hook_command_line

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
    from memself.hook.command import hook_command_agent, hook_command_line

    for kind in HOSTS[host].EVENT_NAMES:
        line = hook_command_line(host, kind)
        assert hook_command_agent(line) == host
        argv = shlex.split(line)
        assert argv[:6] == shlex.split(hook_command_line(host))
        reply = arg(argv, EMPTY_REPLY_ARG)
        assert reply is None or json.loads(reply) == {}


# --- the core names no host ---------------------------------------------------------------------

# Host names (also in their environment variables: CLAUDE_..., CURSOR_...) and their tools.
HOST_WORDS = re.compile(
    r"claude|cursor|codebuddy|workbuddy|askuserquestion|askquestion|ask_followup_question|update_memory",
    re.IGNORECASE,
)
# The core: memself but its host adapters and installers, and the hook entry (``hooks/``); every
# line of every file, comments and docstrings included. (The skill the installers copy into each
# client, ``installers/skills``, names the clients' popup tools on purpose.)
CORE_DIRS = ("memself", "hooks")
NOT_CORE = ("memself/hosts", "memself/install")
PAGE_STYLE = "memself/page/assets.py"
_CSS_CURSOR = re.compile(r"\bcursor: (pointer|default);")
# What may stay, each with why: (file, the line, stripped).
ALLOWED = {
    # ``memself config``'s description of showRecall names the client that shows it (the README's).
    ("memself/config.py", '"showRecall": Key(bool, False, "把召回的条目也展示给用户（Claude Code）"),'),
    # The page's style sheet: CSS's ``cursor`` property, not the client.
    *(
        (PAGE_STYLE, line.strip())
        for line in (REPO / PAGE_STYLE).read_text(encoding="utf-8").splitlines()
        if _CSS_CURSOR.search(line)
    ),
}


def core_files(root: Path) -> list[Path]:
    """Every file of the core under ``root``, whatever its kind (bytecode caches aside)."""
    return sorted(
        path
        for folder in CORE_DIRS
        for path in (root / folder).rglob("*")
        if path.is_file()
        and "__pycache__" not in path.parts
        and not any(path.is_relative_to(root / other) for other in NOT_CORE)
    )


def host_names(root: Path) -> set[tuple[str, str]]:
    """(file, line) of every line of the core under ``root`` that names a host or its tools."""
    return {
        (path.relative_to(root).as_posix(), line.strip())
        for path in core_files(root)
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines()
        if HOST_WORDS.search(line)
    }


def test_the_core_names_no_host() -> None:
    """Host names, their environment variables and their tools appear in ``hosts/`` and
    ``installers/`` only: the core gets what it needs from the adapter it is handed."""
    found = host_names(REPO)
    assert found - ALLOWED == set()
    assert ALLOWED <= found  # an entry no longer needed is taken out


def test_a_host_name_added_anywhere_in_the_core_is_found(tmp_path: Path) -> None:
    """Guard against a vacuous check: a copy of the core with host names added in a nested
    module's comment, a string of the entry, the old-place shim, a new module's docstring and a
    data file; the same in an adapter is where it belongs."""
    for folder in CORE_DIRS:
        shutil.copytree(REPO / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    assert host_names(tmp_path) == host_names(REPO)
    added = {
        "memself/judge/seal.py": "# what Cursor shows",
        "memself/hooks/entry.py": 'PROJECT = "CODEBUDDY_PROJECT_DIR"',
        "hooks/entry.py": "# as Claude Code runs it",
        "memself/hook/extra.py": '"""For WorkBuddy."""',
        "memself/data/extra.json": '{"tool": "AskUserQuestion"}',
    }
    for name, line in {**added, "memself/hosts/cursor.py": "# Cursor"}.items():
        path = tmp_path / name
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        path.write_text(text + "\n" + line + "\n", encoding="utf-8")
    assert host_names(tmp_path) - host_names(REPO) == set(added.items())


def test_the_core_holds_no_event_name() -> None:
    """The hook process knows its event from its command line (``--event``, a kind): no host's
    event name is spelled anywhere in the core, not even lower-cased for a byte search."""
    kinds = {kind.value for kind in EventKind}
    # A name that is also a kind's own name ("stop") cannot be told apart from the kind.
    names = {name.lower() for adapter in HOSTS.values() for name in adapter.EVENT_NAMES.values()} - kinds
    assert {"userpromptsubmit", "beforesubmitprompt", "sessionstart"} <= names
    found = {
        (path.relative_to(REPO).as_posix(), line.strip())
        for path in core_files(REPO)
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines()
        if any(name in line.lower() for name in names)
    }
    assert found == set()
