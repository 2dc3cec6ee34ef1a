"""One log file in the data directory. Logging never raises and never blocks a hook.

Callers pass ids, counts and reasons, never prompts or keys: secrets must not reach a log.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from memself.paths import DataPaths
from memself.platform import files as platform_files

_MAX_BYTES = 2 * 1024 * 1024


def log(paths: DataPaths | None, event: str, **fields: object) -> None:
    """Append ``<time> <event> {fields}`` to ``memself.log``; fall back to stderr if that fails."""
    target = (paths or DataPaths.default()).log_file
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    detail = json.dumps(fields, ensure_ascii=False, default=str) if fields else ""
    line = f"{stamp} pid={os.getpid()} {event} {detail}".rstrip() + "\n"
    try:
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        _rotate_if_large(target)
        platform_files.append_whole(target, line.encode("utf-8", errors="replace"))
    except OSError:
        try:
            sys.stderr.write("memself: " + line)
        except Exception:
            pass


def _rotate_if_large(target: Path) -> None:
    try:
        if target.stat().st_size > _MAX_BYTES:
            os.replace(target, target.with_suffix(".log.1"))
    except OSError:
        pass
