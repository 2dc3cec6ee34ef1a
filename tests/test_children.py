"""The reaper of spawned children: waits for the pids registered with it, and only those."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from memself import children
from tests.support import foreign

# Pids waited for with waitpid, zombies seen in /proc: POSIX's way. The Windows branch waits
# through Popen objects (tests/test_platform_layer.py).
POSIX_ONLY = pytest.mark.skipif(foreign.active(), reason="POSIX waitpid; the foreign mode has none of it")


def exited(pid: int) -> bool:
    with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
        return handle.read().rsplit(")", 1)[1].split()[0] == "Z"


@POSIX_ONLY
def test_reaps_registered_children_and_leaves_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(children, "_PENDING", {})
    monkeypatch.setattr(children, "_enabled", True)
    mine = os.posix_spawn(sys.executable, [sys.executable, "-c", "pass"], dict(os.environ))
    theirs = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    children.track(mine)
    deadline = time.monotonic() + 20
    while not (exited(mine) and exited(theirs.pid)) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert children.reap() == 0
    with pytest.raises(ChildProcessError):
        os.waitpid(mine, os.WNOHANG)  # already waited for
    assert theirs.wait(5) == 3  # still there for its owner, with its real exit status


@POSIX_ONLY
def test_a_running_child_is_kept_until_it_exits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(children, "_PENDING", {})
    monkeypatch.setattr(children, "_enabled", True)
    read_end, write_end = os.pipe()
    pid = os.posix_spawn(
        sys.executable,
        [sys.executable, "-c", "import sys; sys.stdin.read()"],
        dict(os.environ),
        file_actions=[(os.POSIX_SPAWN_DUP2, read_end, 0)],
    )
    os.close(read_end)
    children.track(pid)
    assert children.reap() == 1
    os.close(write_end)  # EOF: the child exits
    deadline = time.monotonic() + 20
    while children.reap() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert children.reap() == 0


def test_registering_is_off_outside_a_reaper(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(children, "_PENDING", {})
    monkeypatch.setattr(children, "_enabled", False)
    children.track(os.getpid())
    assert children._PENDING == {}
