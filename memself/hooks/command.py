"""The command line installers register for a host's hooks, and how to recognise ours."""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from memself.hosts.base import EventKind, HookEvent, HookReply

ENTRY = Path(__file__).resolve().with_name("entry.py")

_AGENT = r"""["']?\s+(?:\S+\s+)*?--agent(?:=|\s+)["']?([A-Za-z0-9_-]+)"""
_PATTERNS = (
    # Ours: <python> -I -S <...>/memself/hooks/entry.py --agent HOST (wheel or editable install),
    # and <repo>/hooks/entry.py, where editable installs registered it before it moved.
    re.compile(r"""(?:^|[\s"'\\/])hooks[\\/]entry\.py""" + _AGENT),
    # Ours, slow entry: memself hook --agent HOST, or <python> -m memself hook --agent HOST.
    re.compile(r"""(?:^|[\s"'\\/])memself(?:\.exe)?["']?\s+hook""" + _AGENT),
    # The original Node plugin: "<node>" "<repo>/bin/memory.mjs" hook --agent HOST.
    re.compile(r"""memory\.mjs["']?\s+hook""" + _AGENT),
)


def hook_command(host: str, kind: EventKind | None = None) -> list[str]:
    """Absolute argv for ``host``'s hooks: no shell features, no PATH lookup, no site-packages.

    With ``kind``, the command registered for that event: it also names the event's kind and
    carries the timeout the host is given for it and, where the host wants one, its answer for
    "nothing", both from the adapter, so the hook process keeps the host's deadline and knows
    what it runs for without importing any adapter.
    """
    from memself.errors import InvalidInput
    from memself.hook.deadline import EMPTY_REPLY_ARG, TIMEOUT_ARG
    from memself.hook.inputs import EVENT_ARG
    from memself.hosts import HOSTS

    adapter = HOSTS.get(host)
    if adapter is None:
        raise InvalidInput(f"未知客户端「{host}」，可用：{'、'.join(HOSTS)}")
    argv = [os.path.abspath(sys.executable), "-I", "-S", str(ENTRY), "--agent", host]
    if kind is None:
        return argv
    argv += [EVENT_ARG, kind.value, TIMEOUT_ARG, str(adapter.TIMEOUTS[kind])]
    event = HookEvent(host, kind, adapter.EVENT_NAMES[kind], "", "", "", "", False)
    empty = adapter.render(event, HookReply())
    if empty is not None:
        # Spelled as the hook prints any answer (``memself.hook.run``; a test holds the two equal).
        argv += [EMPTY_REPLY_ARG, json.dumps(empty, ensure_ascii=False, separators=(",", ":"))]
    return argv


def hook_command_line(host: str, kind: EventKind | None = None) -> str:
    """``hook_command`` as one POSIX shell string, for config files whose ``command`` is a string."""
    return shlex.join(hook_command(host, kind))


def hook_command_agent(cmd: str | Sequence[str]) -> str | None:
    """The ``--agent`` of a hook command that is ours or the original plugin's, else ``None``."""
    text = cmd if isinstance(cmd, str) else " ".join(cmd)
    for pattern in _PATTERNS:
        match = pattern.search(text)
        if match:
            return match.group(1)
    return None


def is_our_hook_command(cmd: str | Sequence[str]) -> bool:
    """True for memself's hook commands and the original plugin's (installers replace both)."""
    return hook_command_agent(cmd) is not None
