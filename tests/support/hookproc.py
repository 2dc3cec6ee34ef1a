"""Run the real hook entry as hosts do (``python -I -S memself/hooks/entry.py --agent HOST``), with the
data directory's engines hosting the small test service and all of them stopped afterwards.

Used by the bad-input table, the golden files and the import test.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from memself.hook.command import hook_command
from memself.hosts import HOSTS
from memself.hosts.base import event_kind
from memself.paths import DataPaths

REPO_ROOT = Path(__file__).resolve().parents[2]
PAYLOADS = REPO_ROOT / "tests" / "fixtures" / "payloads"
TEST_SERVICE = "tests.support.engine_test_service:make"


@dataclass(frozen=True)
class HookProc:
    rc: int
    stdout: bytes
    stderr: bytes
    elapsed_s: float

    def answer(self) -> dict | None:
        """The one JSON object printed, or None; fails on anything else."""
        if not self.stdout:
            return None
        text = self.stdout.decode("utf-8")
        assert text.endswith("\n") and text.count("\n") == 1, text[:300]
        value = json.loads(text)
        assert isinstance(value, dict), text[:300]
        return value


def run_entry(
    host: str,
    stdin: bytes,
    *,
    env: Mapping[str, str] | None = None,
    extra_args: Sequence[str] = (),
    python_flags: Sequence[str] = (),
    timeout: float = 30,
    host_timeout_s: float | None = None,
) -> HookProc:
    """``host_timeout_s`` replaces the host's timeout on the registered command line, for a test
    about something else than the deadline that a loaded machine must not turn into one."""
    argv = registered_command(host, stdin)
    if host_timeout_s is not None:
        argv[argv.index("--timeout") + 1] = f"{host_timeout_s:g}"
    argv = [argv[0], *python_flags, *argv[1:], *extra_args]
    started = time.monotonic()
    proc = subprocess.run(
        argv,
        input=stdin,
        capture_output=True,
        timeout=timeout,
        env=dict(env) if env is not None else None,
        cwd=tempfile.gettempdir(),
    )
    return HookProc(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started)


def registered_command(host: str, stdin: bytes) -> list[str]:
    """The command the installers register for the event ``stdin`` names (timeout and "no
    answer" output included); the bare one when it names none of the host's events."""
    try:
        name = json.loads(stdin).get("hook_event_name")
    except (ValueError, RecursionError, AttributeError):
        name = None
    kind = event_kind(name)
    return hook_command(host, kind if kind in HOSTS[host].TIMEOUTS else None)


def hook_runs(paths: DataPaths) -> list[dict]:
    """The ``hook-run`` lines ``memself.hook.run`` logged, parsed."""
    if not paths.log_file.exists():
        return []
    runs = []
    for line in paths.log_file.read_text(encoding="utf-8").splitlines():
        if " hook-run " in line:
            runs.append(json.loads(line.split(" hook-run ", 1)[1]))
    return runs


def load_payloads(name: str) -> dict[str, dict]:
    return json.loads((PAYLOADS / name).read_text(encoding="utf-8"))


def _engine_pid(paths: DataPaths) -> int | None:
    from memself.engine.client import EngineClient
    from memself.errors import EngineUnavailable

    with contextlib.suppress(EngineUnavailable, OSError):
        pid = EngineClient(paths).ping(0.3).get("pid")
        return pid if isinstance(pid, int) else None
    return None


@pytest.fixture
def hook_data(monkeypatch: pytest.MonkeyPatch) -> Iterator[DataPaths]:
    """The test's data dir, engines hosting the test service; every engine is stopped after."""
    runtime = Path(tempfile.mkdtemp(prefix="msh-", dir="/tmp"))  # short: socket path limit
    monkeypatch.setenv("MEMSELF_RUNTIME_DIR", str(runtime / "rt"))
    monkeypatch.setenv("MEMSELF_ENGINE_SERVICE", TEST_SERVICE)
    old = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT) + (os.pathsep + old if old else ""))
    paths = DataPaths.default()
    paths.ensure()
    try:
        yield paths
    finally:
        _stop_engines(paths)
        shutil.rmtree(runtime, ignore_errors=True)


def _stop_engines(paths: DataPaths) -> None:
    """An engine spawned by a hook may still be starting: look for it for a moment."""
    from memself.engine.client import stop_engine
    from memself.platform import locks

    started = time.monotonic()
    deadline = started + 3.0
    lock = _lock_path(paths)
    # Where the spawning hook cannot hand its lock to the engine (Windows' rules), a starting
    # engine holds no lock until it runs: keep looking for a while before believing it absent.
    settle = 0.0 if locks.inherited() else 1.5
    while time.monotonic() < deadline:
        pid = _engine_pid(paths)
        if pid is not None:
            with contextlib.suppress(Exception):
                stop_engine(paths, timeout_s=3.0)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if (lock is None or not _lock_held(lock)) and time.monotonic() - started >= settle:
            return
        time.sleep(0.1)


def _lock_path(paths: DataPaths) -> Path | None:
    with contextlib.suppress(Exception):
        from memself.engine.location import locate

        return locate(paths.root).lock_path
    return None


def _lock_held(lock: Path) -> bool:
    with contextlib.suppress(Exception):
        from memself.engine import instance_lock

        return instance_lock.is_held(lock)
    return False
