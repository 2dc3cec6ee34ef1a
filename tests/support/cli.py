"""The ``memself`` command as a user runs it: a child process of this interpreter, in the test's
environment (its fake home), with no terminal on stdin, its output captured as text."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# Generous: a loaded machine can take seconds to start Python; a real hang still ends the test.
CLI_TIMEOUT_S = 180


def memself(
    *args: str,
    cwd: Path | str | None = None,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
    timeout: float = CLI_TIMEOUT_S,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m memself *args``; ``env`` replaces the inherited environment, ``stdin``
    (text) is fed to it (none: stdin is /dev/null)."""
    return subprocess.run(
        [sys.executable, "-m", "memself", *args],
        input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=os.environ.copy() if env is None else env,
        cwd=cwd,
        check=False,
    )
