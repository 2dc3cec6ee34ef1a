"""Each host's facts, read from its data file in the top-level ``hosts/`` folder.

A host is two things: facts (event names and timeouts, payload fields, popup wording, config
folder, hook file and its shape, MCP files, shells per system) in ``hosts/<name>.json``, and
behaviour (parse a payload, render a reply) in ``memself/hosts/<name>.py``, which takes the
shared defaults of ``memself.hosts.common`` unless the host differs. The adapters, the installers,
the hook command and the hook itself all read the facts from here, so each is stated once.

A file's ``notes`` say why a fact is what it is; they are for people and never read.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, NamedTuple

from memself.hosts.base import EventKind, Popup
from memself.shipped import shipped_dir

SYSTEMS = ("linux", "macos", "windows")
SHELLS = ("sh", "bash", "powershell", "powershell-stage")
REGISTERED_KINDS = (EventKind.SESSION_START, EventKind.PROMPT_SUBMIT, EventKind.STOP)


class HostFacts(NamedTuple):
    name: str
    label: str  # how setup and doctor name the client
    event_names: dict[EventKind, str]  # the host's name for each event memself registers
    timeouts: dict[EventKind, int]  # seconds the host gives each registered event
    session_keys: tuple[str, ...]  # payload fields naming the session, first found wins
    turn_keys: tuple[str, ...]  # payload fields naming the turn (none: the host sends none)
    prompt_keys: tuple[str, ...]
    project_dir_env: tuple[str, ...]  # variables naming the project when the payload does not
    system_message: bool  # whether the reply may carry a message shown to the user only
    ask_tool: str  # the host's popup tool
    popup: Popup  # the popup as the confirmation instruction describes it
    context_limit: int  # characters of injected text the host takes inline
    own_memory: str  # the host's own memory, which our instructions leave alone ("" for none)
    config_dir: str  # relative to the user's home on every system
    config_env: str | None  # a variable naming another config folder
    config_env_ignored: tuple[str, ...]  # folders the variable is ignored for (another host's)
    hooks_file: str  # relative to the config folder
    hook_shape: Literal["nested", "flat"]
    hook_shells: dict[str, str]  # per system, the shell that runs a hook's command string
    hook_shell_field: bool  # whether a hook entry names its shell in a "shell" field
    hook_fields: dict[EventKind, dict[str, Any]]  # extra fields of a flat hook entry, per event
    mcp_via: Literal["file", "claude-cli"]
    mcp_file: str | None  # where ours is registered, relative to the config folder
    other_mcp_files: tuple[str, ...]  # where an earlier registration of ours may sit
    mcp_read_order: tuple[str, ...]  # the host reads the first of these that exists

    def config_root(self, home: Path, env: Mapping[str, str] | None = None) -> Path:
        """The client's config folder: the one its variable names, else ``home/config_dir``."""
        environ = os.environ if env is None else env
        named = environ.get(self.config_env, "").strip() if self.config_env else ""
        if named:
            folder = Path(named).expanduser()
            if all(not _same_folder(folder, home / other) for other in self.config_env_ignored):
                return folder
        return home / self.config_dir


class HostFactsError(ValueError):
    """A host's data file is missing a fact or states one wrongly (a packaging error)."""


def facts_path(name: str) -> Path:
    return shipped_dir("hosts") / f"{name}.json"


def load_facts(name: str) -> HostFacts:
    """The facts of host ``name``, checked; ``HostFactsError`` names the file and the fact."""
    path = facts_path(name)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return _facts(data, name)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise HostFactsError(f"{path}: {type(exc).__name__}: {exc}") from exc


def _facts(data: dict[str, Any], name: str) -> HostFacts:
    if data["name"] != name:
        raise ValueError(f"names host {data['name']!r}")
    events = data["events"]
    kinds = {kind: events[kind.value] for kind in REGISTERED_KINDS}
    payload, popup, config, hooks, mcp = (
        data["payload"],
        data["popup"],
        data["config"],
        data["hooks"],
        data["mcp"],
    )
    shells = {system: _one_of(hooks["shells"][system], SHELLS) for system in SYSTEMS}
    return HostFacts(
        name=name,
        label=_text(data["label"]),
        event_names={kind: _text(e["name"]) for kind, e in kinds.items()},
        timeouts={kind: _positive(e["timeout"]) for kind, e in kinds.items()},
        session_keys=_texts(payload["session_keys"]),
        turn_keys=_texts(payload["turn_keys"]),
        prompt_keys=_texts(payload["prompt_keys"]),
        project_dir_env=_texts(payload["project_dir_env"]),
        system_message=_flag(data["reply"]["system_message"]),
        ask_tool=_text(popup["ask_tool"]),
        popup=Popup(_text(popup["wording"]), _texts(popup["memory_tools"])),
        context_limit=_positive(data["context_limit"]),
        own_memory=str(data["own_memory"]),
        config_dir=_text(config["dir"]),
        config_env=config["env"] if config["env"] is None else _text(config["env"]),
        config_env_ignored=_texts(config["env_ignored"]),
        hooks_file=_text(hooks["file"]),
        hook_shape=_one_of(hooks["shape"], ("nested", "flat")),  # type: ignore[arg-type]
        hook_shells=shells,
        hook_shell_field=_flag(hooks["shell_field"]),
        hook_fields={EventKind(kind): dict(fields) for kind, fields in hooks["fields"].items()},
        mcp_via=_one_of(mcp["via"], ("file", "claude-cli")),  # type: ignore[arg-type]
        mcp_file=mcp["file"] if mcp["file"] is None else _text(mcp["file"]),
        other_mcp_files=_texts(mcp["other_files"]),
        mcp_read_order=_texts(mcp["read_order"]),
    )


def _text(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected a non-empty string, got {value!r}")
    return value


def _texts(value: object) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise ValueError(f"expected a list of strings, got {value!r}")
    return tuple(_text(v) for v in value)


def _flag(value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {value!r}")
    return value


def _positive(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"expected a positive integer, got {value!r}")
    return value


def _one_of(value: object, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ValueError(f"expected one of {allowed}, got {value!r}")
    return str(value)


def _same_folder(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)
