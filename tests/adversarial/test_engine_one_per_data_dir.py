"""One engine per data directory, whatever runtime directory a process was started with: a
terminal and a GUI host often disagree on ``XDG_RUNTIME_DIR``, and two engines on one data
directory each hold a model in memory and each rewrite the index."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from memself.engine.client import EngineClient, call_engine, ensure_started
from memself.engine.location import RUNTIME_ENV
from memself.paths import DataPaths
from tests.support.engines import start_engine_process
from tests.support.hookcore_service import RECALLED_RULE
from tests.support.hookproc import hook_data, hook_runs, run_entry

__all__ = ["hook_data"]


@pytest.fixture
def two_runtime_dirs() -> Iterator[tuple[Path, Path]]:
    base = Path(tempfile.mkdtemp(prefix="ms2-", dir="/tmp"))  # short: socket path limit
    (base / "a").mkdir(mode=0o700)
    (base / "b").mkdir(mode=0o700)
    yield base / "a", base / "b"
    shutil.rmtree(base, ignore_errors=True)


def prompt_payload() -> bytes:
    return json.dumps(
        {
            "hook_event_name": "UserPromptSubmit",
            "session_id": "sess-two",
            "prompt": "回答应该用什么语言",
            "cwd": "/tmp",
        },
        ensure_ascii=False,
    ).encode()


@pytest.mark.parametrize("variable", [RUNTIME_ENV, "XDG_RUNTIME_DIR"])
def test_a_second_runtime_dir_reaches_the_one_engine(
    variable: str, hook_data: DataPaths, two_runtime_dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = hook_data
    first, second = two_runtime_dirs
    monkeypatch.setenv("MEMSELF_ENGINE_SERVICE", "tests.support.hookcore_service:make")
    if variable != RUNTIME_ENV:
        monkeypatch.delenv(RUNTIME_ENV)
    monkeypatch.setenv(variable, str(first))
    engine_pid = call_engine(paths, "echo", {}, timeout_s=30)["pid"]
    try:
        monkeypatch.setenv(variable, str(second))
        other = start_engine_process(paths)
        try:
            code = other.wait(timeout=10)
        except subprocess.TimeoutExpired:
            other.kill()
            other.wait()
            pytest.fail("a second engine serves the same data directory")
        assert code == 0  # it saw the running engine and left
        assert EngineClient(paths).ping()["pid"] == engine_pid
        assert ensure_started(paths) == "running"
        assert call_engine(paths, "echo", {}, timeout_s=10)["pid"] == engine_pid
        # The hook's fast path, started with the other runtime directory, is answered by it.
        proc = run_entry("claude", prompt_payload())
        assert proc.rc == 0
        answer = proc.answer()
        assert answer is not None
        assert RECALLED_RULE in answer["hookSpecificOutput"]["additionalContext"]
        assert [r.get("note") for r in hook_runs(paths)] == ["engine"]
    finally:  # whichever runtime directory the test ended in, this engine goes
        with contextlib.suppress(ProcessLookupError):
            os.kill(engine_pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(engine_pid, 0)
