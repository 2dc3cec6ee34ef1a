"""Claude Code: Claude's JSON protocol; its facts are in ``hosts/claude.json``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from memself.hosts.common import claudelike_renderer, payload_cwd, payload_parser
from memself.hosts.cursor import NAME as CURSOR
from memself.hosts.cursor import first_root as cursor_root
from memself.hosts.cursor import runs_this_hook as runs_in_cursor
from memself.hosts.facts import load_facts

FACTS = load_facts("claude")
NAME = FACTS.name
ASK_TOOL = FACTS.ask_tool
POPUP = FACTS.popup
EVENT_NAMES = FACTS.event_names
TIMEOUTS = FACTS.timeouts
CONTEXT_LIMIT = FACTS.context_limit
OWN_MEMORY = FACTS.own_memory
CONFIG_DIR = FACTS.config_dir
CONFIG_ENV = FACTS.config_env
HOOK_SHELLS = FACTS.hook_shells
HOOK_SHELL_FIELD = FACTS.hook_shell_field


def working_directory(payload: dict[str, Any]) -> str:
    """``cwd``; Cursor, running this Claude-registered hook with its own payload, sends
    ``workspace_roots`` instead (read as Cursor's adapter reads them)."""
    return payload_cwd(payload) or cursor_root(payload)


parse = payload_parser(FACTS, working_directory)
render = claudelike_renderer(FACTS)


def steps_aside(payload: dict[str, Any], env: Mapping[str, str], registered: Callable[[str], bool]) -> bool:
    """Cursor also runs hooks from ``~/.claude/settings.json``. When this Claude-registered hook
    runs inside Cursor and Cursor's own hook of ours is installed, that one answers: injecting
    twice wastes context and a Claude-format Stop hook under Cursor has no loop cap."""
    return runs_in_cursor(payload, env) and registered(CURSOR)
