"""Claude Code keeps user-scope MCP servers in ``~/.claude.json``, a state file it rewrites all
the time, so we never edit it: registration goes through ``claude mcp add --scope user``.
This module finds the ``claude`` binary and reads (only reads) what is registered.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from memself.install.entries import SERVER_NAME

BIN_ENV = "MEMORY_CLAUDE_BIN"


def find_claude(home: Path, env: Mapping[str, str] | None = None) -> str | None:
    """``$MEMORY_CLAUDE_BIN``, else ``claude`` on PATH, else the desktop app's newest bundled copy.

    The explicit variable comes first (the original looked at it last): a user who sets it
    means that binary, whatever else is installed.
    """
    env = os.environ if env is None else env
    explicit = env.get(BIN_ENV, "").strip()
    if explicit and os.access(explicit, os.X_OK) and Path(explicit).is_file():
        return str(Path(explicit).resolve())
    on_path = shutil.which("claude", path=env.get("PATH"))
    if on_path:
        return on_path
    return _desktop_copy(home)


def _desktop_copy(home: Path) -> str | None:
    roots = [
        home / "Library" / "Application Support" / "Claude" / "claude-code",
        home / "AppData" / "Roaming" / "Claude" / "claude-code",
    ]
    found: list[tuple[tuple[int, ...], Path]] = []
    for root in roots:
        if not root.is_dir():
            continue
        for version_dir in root.iterdir():
            for name in ("claude", "claude.exe"):
                candidate = version_dir / name
                if candidate.is_file() and os.access(candidate, os.X_OK):
                    found.append((_version_key(version_dir.name), candidate))
    return str(max(found)[1]) if found else None


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", name)) or (0,)


def state_file(home: Path) -> Path:
    return home / ".claude.json"


def registered_entry(home: Path) -> dict[str, Any] | None:
    """Our user-scope server as Claude Code stored it, or None (absent or unreadable file)."""
    try:
        data = json.loads(state_file(home).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    entry = servers.get(SERVER_NAME) if isinstance(servers, dict) else None
    return entry if isinstance(entry, dict) else None


def matches(entry: Mapping[str, Any] | None, command: Sequence[str]) -> bool:
    return entry is not None and entry.get("command") == command[0] and entry.get("args") == list(command[1:])


def add_argv(claude: str, command: Sequence[str]) -> list[str]:
    return [claude, "mcp", "add", "--scope", "user", SERVER_NAME, "--", *command]


def remove_argv(claude: str) -> list[str]:
    return [claude, "mcp", "remove", "--scope", "user", SERVER_NAME]


def shell_line(argv: Sequence[str]) -> str:
    return shlex.join(argv)
