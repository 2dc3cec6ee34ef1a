"""The command line installers register for a host's hooks, and how to recognise ours.

One argv, spelled for the shell the host runs it in on this system (the adapter's
``HOOK_SHELLS``): a POSIX shell on Linux and macOS; on Windows Git Bash (paths with forward
slashes, which Git Bash, Python and Windows all read) or PowerShell (the call operator ``&``
before a quoted path, single quotes doubled inside single quotes, and UTF-8 both ways: Windows
PowerShell re-encodes what it pipes to a program with ``$OutputEncoding``, ASCII by default, and
decodes what it reads back with the console's code page, GBK on a Chinese system).
"""

from __future__ import annotations

import json
import ntpath
import os
import re
import shlex
import sys
from collections.abc import Sequence

from memself.hosts.base import EventKind, HookEvent, HookReply
from memself.shipped import shipped_dir

ENTRY = shipped_dir("hooks") / "entry.py"

_AGENT = r"""["']?\s+(?:\S+\s+)*?--agent(?:=|\s+)["']?([A-Za-z0-9_-]+)"""
_PATTERNS = (
    # Ours: <python> -I -S <...>/hooks/entry.py --agent HOST: <repo>/hooks/entry.py (a source
    # tree), <site>/memself/_shipped/hooks/entry.py (a wheel), and the old place of both,
    # <...>/memself/hooks/entry.py.
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


def hook_command_line(host: str, kind: EventKind | None = None, system: str | None = None) -> str:
    """``hook_command`` as one string for the shell ``host`` runs hooks in on ``system`` ("linux",
    "macos", "windows"; default: this machine's own), for config files whose ``command`` is a
    string."""
    from memself.hosts import HOSTS
    from memself.platform import system as platform_system

    argv = hook_command(host, kind)
    return command_line(argv, HOSTS[host].HOOK_SHELLS[system or platform_system.real_name()])


def command_line(argv: Sequence[str], shell: str) -> str:
    """``argv`` as one command string for ``shell``: "sh", "bash" (Git Bash: Windows paths get
    forward slashes), "powershell" (the payload is PowerShell's own stdin) or "powershell-stage"
    (the host pipes the payload into the command, a stage of its pipeline)."""
    if shell in ("powershell", "powershell-stage"):
        return powershell_command(argv, stage=shell == "powershell-stage")
    if shell == "bash":
        return shlex.join(git_bash_path(arg) for arg in argv)
    return shlex.join(argv)


def git_bash_path(arg: str) -> str:
    """A Windows path (``C:\\Users\\张 三\\x.exe``) with forward slashes, which Git Bash does not
    take for escapes; anything else unchanged."""
    drive, rest = ntpath.splitdrive(arg)
    if len(drive) == 2 and drive[1] == ":" and rest.startswith(("\\", "/")):
        return drive + rest.replace("\\", "/")
    return arg


_POWERSHELL_BARE = re.compile(r"-{0,2}[A-Za-z0-9_][A-Za-z0-9_.=-]*")


def powershell_quote(arg: str) -> str:
    """One argument for PowerShell: bare when it holds nothing PowerShell would read, else in
    single quotes (no expansion inside) with each single quote doubled. Typographic quotes count
    as quotes to PowerShell, so they are doubled too."""
    if _POWERSHELL_BARE.fullmatch(arg):
        return arg
    return "'" + re.sub("(['\u2018\u2019\u201a\u201b])", r"\1\1", arg) + "'"


def powershell_command(argv: Sequence[str], stage: bool = False) -> str:
    """A PowerShell command running ``argv`` with the payload as its stdin, UTF-8 both ways: a
    script block that the payload is piped into, by the command itself (``$input``: PowerShell's
    stdin) or, as a ``stage``, by the host's own pipeline (an expression cannot stand there)."""
    if any('"' in arg for arg in argv):
        # Windows PowerShell drops embedded double quotes when it starts a program.
        raise ValueError("a PowerShell hook command cannot carry double quotes")
    call = " ".join(["&", *(powershell_quote(arg) for arg in argv)])
    utf8 = "[System.Text.UTF8Encoding]::new($false)"
    block = f"& {{ $OutputEncoding = [Console]::OutputEncoding = {utf8}; $input | {call} }}"
    return block if stage else f"$input | {block}"


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
