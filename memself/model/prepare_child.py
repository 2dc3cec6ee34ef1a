"""Preparation in a child process, and ending it when the process that started it stops.

The child (``memself.model.prepare``) holds a model's weights at full size (and, for a model the
graph builder does not cover, torch): memory that the caller, often the long-lived engine, should
never hold. It runs in its own process group, so that stopping the
engine (``memself engine stop``, its idle exit, a SIGTERM) ends it and whatever it started too,
instead of leaving it to finish alone with its temporary files.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from memself.errors import ModelUnavailable
from memself.launcher import python_command
from memself.platform import children

# How long a stopped child gets to remove its temporary folder before it is killed.
STOP_GRACE_S = 3.0


@dataclass
class _Running:
    process: subprocess.Popen[bytes]
    error_file: str


_running: dict[int, _Running] = {}
_running_lock = threading.Lock()


def prepare_in_child(model: str, cache_dir: Path | None) -> None:
    """Run preparation (torch, sentence-transformers) in a child process. Its own messages and
    progress reach the same terminal; its error comes back through a file."""
    fd, error_file = tempfile.mkstemp(prefix="memself-prepare-", suffix=".txt")
    os.close(fd)
    command = python_command("memself.model.prepare", model, "--error-file", error_file)
    if cache_dir is not None:
        command += ["--cache-dir", str(cache_dir)]
    try:
        try:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, **children.popen_own_group())
        except OSError as exc:
            raise ModelUnavailable(f"无法启动向量模型的准备进程：{exc}") from exc
        with _running_lock:
            _running[process.pid] = _Running(process, error_file)
        try:
            code = process.wait()
        except BaseException:  # Ctrl-C at a terminal reaches only us: the child's group goes too
            _end(process, STOP_GRACE_S)
            raise
        finally:
            with _running_lock:
                _running.pop(process.pid, None)
        try:
            message = Path(error_file).read_text(encoding="utf-8").strip()
        except OSError:
            message = ""
    finally:
        Path(error_file).unlink(missing_ok=True)
    if code != 0:
        raise ModelUnavailable(
            message or f"准备向量模型 {model} 失败（退出码 {code}）：运行 memself model prepare 查看详情"
        )


def stop_preparations(grace_s: float = STOP_GRACE_S) -> list[int]:
    """End every preparation this process started and remove its error file; the pids ended.

    The waiting thread then sees the child's exit and fails with "preparation failed", which a
    stopping engine never reports."""
    with _running_lock:
        running = list(_running.values())
    for item in running:
        _end(item.process, grace_s)
        with contextlib.suppress(OSError):
            os.unlink(item.error_file)
    return [item.process.pid for item in running]


def _end(process: subprocess.Popen[bytes], grace_s: float) -> None:
    """SIGTERM to the child's group (the child then removes its temporary folder), SIGKILL to
    the group after ``grace_s``."""
    children.end_group(process, force=False)
    deadline = time.monotonic() + grace_s
    while process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    children.end_group(process, force=True)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=grace_s)
