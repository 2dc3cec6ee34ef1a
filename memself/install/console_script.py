"""The ``memself`` console script pip writes, made to start Python in isolated mode.

pip writes ``#!<python>``, or for an interpreter path with spaces (or too long for a shebang) a
``/bin/sh`` preamble that runs ``exec "<python>" "$0" "$@"``. Either start honours
``PYTHONPATH``, and ``site`` imports ``sitecustomize`` from it before the script's first line: a
project that sets it (a client's project settings, a shell's per-directory environment) would
run its own code in a process that can read the key. ``-I`` ignores it, with every other
``PYTHON*`` variable and the user's site-packages. The package is still found: a wheel and an
editable install both live in the interpreter's own site-packages.

``python -I -m memself.install.console_script PATH`` is what ``installers/install.sh`` runs after
pip; a second run changes nothing.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from memself.atomic import write_atomic

_SHEBANG = re.compile(rb"\A#!([^ \t\r\n]*python[0-9.]*)(\r?\n)")
_SH_EXEC = re.compile(rb"^('''exec' \"[^\"\n]*python[0-9.]*\") (\"\$0\" \"\$@\")$", re.MULTILINE)


def isolated_text(script: bytes) -> bytes | None:
    """The script with ``-I`` added to the interpreter's start; None when it has it already or
    is not a script pip wrote for a Python interpreter."""
    match = _SHEBANG.match(script)
    if match:
        return b"#!" + match.group(1) + b" -I" + match.group(2) + script[match.end() :]
    if script.startswith(b"#!/bin/sh"):
        replaced, count = _SH_EXEC.subn(rb"\1 -I \2", script, count=1)
        return replaced if count else None
    return None


def isolate_console_script(path: Path) -> bool:
    """Rewrite ``path`` in place (same mode) when it needs ``-I``; whether it changed."""
    script = path.read_bytes()
    changed = isolated_text(script)
    if changed is None:
        return False
    write_atomic(path, changed, mode=os.stat(path).st_mode & 0o7777)
    return True


def main(argv: list[str]) -> int:
    for name in argv:
        path = Path(name)
        if path.is_file():
            isolate_console_script(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
