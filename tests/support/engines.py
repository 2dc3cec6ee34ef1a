"""Engine processes as the tests start them by hand (not through the client's spawn)."""

from __future__ import annotations

import subprocess
import sys

from memself.paths import DataPaths


def serve_command(paths: DataPaths, idle_minutes: float = 1) -> list[str]:
    """``python -m memself.warm serve`` for ``paths``' data directory."""
    return [
        sys.executable,
        "-m",
        "memself.warm",
        "serve",
        "--data-dir",
        str(paths.root),
        "--idle-minutes",
        f"{idle_minutes:g}",
    ]


def start_engine_process(paths: DataPaths, idle_minutes: float = 1) -> subprocess.Popen[bytes]:
    """An engine process for ``paths`` with no stdin, as a host's hook would leave it."""
    return subprocess.Popen(serve_command(paths, idle_minutes), stdin=subprocess.DEVNULL)
