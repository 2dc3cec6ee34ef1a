"""Another local user who creates our runtime directory first (``/tmp/memself-<uid>`` or
``$XDG_RUNTIME_DIR/memself``) must not switch recall off for good: the engine never uses that
directory, listens in a private one it creates itself, and every client still finds it."""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from memself import doctor
from memself.engine.client import EngineClient, stop_engine
from memself.engine.location import RUNTIME_ENV, locate
from memself.errors import EngineUnavailable
from memself.paths import DataPaths
from tests.support import foreign
from tests.support.hookcore_service import RECALLED_RULE
from tests.support.hookproc import hook_data, hook_runs, run_entry
from tests.test_engine import wait_for

# The runtime folder holds the Unix socket; the foreign mode's engine listens on loopback TCP.
pytestmark = foreign.unix_sockets_only()

__all__ = ["hook_data"]

NOBODY = 65534


@pytest.fixture(params=["other-user", "symlink"])
def taken_runtime_dir(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``$XDG_RUNTIME_DIR/memself`` planted before any engine ran: a directory of another user,
    or a symlink to a directory elsewhere. (Not ``/tmp/memself-<uid>`` itself: other processes
    of this user may be using it; the check and the fallback are the same for every candidate.)
    """
    if request.param == "other-user" and os.geteuid() != 0:
        pytest.skip("handing a directory to another uid needs root")
    base = Path(tempfile.mkdtemp(prefix="msx-", dir="/tmp"))  # short: socket path limit
    taken = base / "memself"
    if request.param == "other-user":
        taken.mkdir(mode=0o700)
        os.chown(taken, NOBODY, NOBODY)
    else:
        (base / "elsewhere").mkdir(mode=0o700)
        taken.symlink_to(base / "elsewhere")
    monkeypatch.delenv(RUNTIME_ENV, raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(base))
    yield taken
    shutil.rmtree(base, ignore_errors=True)


def payload(event: str, **extra: str) -> bytes:
    return json.dumps(
        {"hook_event_name": event, "session_id": "sess-taken", "cwd": "/tmp", **extra}, ensure_ascii=False
    ).encode()


def engine_pid(paths: DataPaths) -> int | None:
    try:
        return int(EngineClient(paths).ping(0.5)["pid"])
    except EngineUnavailable:
        return None


def test_engine_falls_back_to_a_private_dir(
    hook_data: DataPaths, taken_runtime_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths, taken = hook_data, taken_runtime_dir
    monkeypatch.setenv("MEMSELF_ENGINE_SERVICE", "tests.support.hookcore_service:make")
    before = os.lstat(taken)
    assert locate(paths.root).runtime_dir == str(taken)  # the directory every client would use

    assert run_entry("claude", payload("SessionStart")).rc == 0  # starts the engine
    pid = wait_for(lambda: engine_pid(paths), 20)
    proc = run_entry("claude", payload("UserPromptSubmit", prompt="回答应该用什么语言"))
    assert proc.rc == 0
    answer = proc.answer()
    assert answer is not None
    assert RECALLED_RULE in answer["hookSpecificOutput"]["additionalContext"]
    assert [r.get("note") for r in hook_runs(paths)][-1] == "engine"

    # The taken directory was never used or changed; the engine's own one is private.
    assert os.listdir(taken) == []
    after = os.lstat(taken)
    assert (after.st_uid, stat.S_IMODE(after.st_mode)) == (before.st_uid, stat.S_IMODE(before.st_mode))
    status = EngineClient(paths).status()
    assert status["pid"] == pid
    own = Path(status["address"]).parent
    info = os.lstat(own)
    assert stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()
    assert stat.S_IMODE(info.st_mode) == 0o700 and own != taken
    assert len(status["address"].encode()) <= 100
    log = paths.log_file.read_text(encoding="utf-8")
    assert "engine-runtime-fallback" in log and str(taken) in log

    lines: list[str] = []
    doctor.render(doctor.run_checks(paths, Path.home(), engine_wait_s=20), lines.append)
    [line] = [line for line in lines if line.startswith("⚠ 运行目录：")]
    assert str(taken) in line and str(own) in line, lines

    assert stop_engine(paths) == pid
    assert not own.exists()  # the engine removes the directory it made for itself
