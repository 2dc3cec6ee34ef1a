"""A lock path that no lock protocol can clear fails every write at once with a clear message, and
crash leftovers (staging folders, temp files of killed writers) are cleaned up."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memself.maintenance import run_daily_maintenance
from memself.store.memory_store import MemoryStore
from tests.support.cli import memself as _memself
from tests.support.helpers import T0, make_store


@pytest.fixture
def store() -> MemoryStore:
    return make_store()


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_lock_path_that_is_a_file_fails_at_once_naming_the_fix(store: MemoryStore) -> None:
    store.paths.lock_dir.write_text("")
    result = _memself("rule", "add", "回答一律使用中文")
    assert result.returncode == 1
    assert str(store.paths.lock_dir) in result.stderr and "不是目录" in result.stderr
    assert "rm " in result.stderr and "超时" not in result.stderr
    assert not store.paths.group_file("rule").exists()


def test_lock_dir_with_a_foreign_file_fails_at_once(store: MemoryStore) -> None:
    store.paths.lock_dir.mkdir()
    (store.paths.lock_dir / "notes.txt").write_text("x")
    result = _memself("rule", "add", "回答一律使用中文")
    assert result.returncode == 1
    assert str(store.paths.lock_dir) in result.stderr and "notes.txt" in result.stderr
    assert "超时" not in result.stderr


def test_doctor_has_a_line_for_a_stuck_lock(store: MemoryStore) -> None:
    from memself.doctor import check_data

    assert check_data(store.paths).ok is True
    store.paths.lock_dir.write_text("")
    check = check_data(store.paths)
    assert check.ok is False and str(store.paths.lock_dir) in check.summary and check.fix


def _leftovers(store: MemoryStore) -> dict[str, Path]:
    root = store.paths.root
    dead, live = _dead_pid(), os.getpid()
    made: dict[str, Path] = {}
    staging = root / ".memory-write-k1ll3d"
    staging.mkdir()
    (staging / f"owner-{dead}-0f0f").touch()
    made["dead staging"] = staging
    live_staging = root / ".memory-write-l1v3"
    live_staging.mkdir()
    (live_staging / f"owner-{live}-0e0e").touch()
    made["live staging"] = live_staging
    made["dead tmp"] = root / f".rule.jsonl.tmp.{dead}.abc123"
    made["live tmp"] = root / f".config.json.tmp.{live}.def456"
    made["old tmp"] = root / f".trash.jsonl.tmp.{live}.old999"
    made["original's tmp"] = root / f"rule.jsonl.tmp.{dead}"
    for key in ("dead tmp", "live tmp", "old tmp", "original's tmp"):
        made[key].write_text("half a file")
    old = time.time() - 2 * 3600
    os.utime(made["old tmp"], (old, old))
    index_tmp = store.paths.index_dir / f".vectors-abc.npy.tmp.{dead}.x1"
    index_tmp.parent.mkdir()
    index_tmp.write_text("x")
    made["index tmp"] = index_tmp
    (store.paths.index_dir / "header.json").write_text(
        json.dumps({"vectors": "vectors-aa.npy", "ids": "ids-aa.npy", "hashes": "hashes-aa.npy"})
    )
    for name in ("vectors-aa.npy", "vectors-bb.npy", "vectors-cc.npy"):
        (store.paths.index_dir / name).write_text("x")
        made[f"index {name}"] = store.paths.index_dir / name
    os.utime(made["index vectors-bb.npy"], (old, old))  # a killed rebuild's orphan generation
    return made


def test_next_write_cleans_dead_and_old_leftovers(store: MemoryStore) -> None:
    made = _leftovers(store)
    store.create("回答一律使用中文", "rule", T0)
    gone = {k for k, p in made.items() if not p.exists()}
    assert gone >= {"dead staging", "dead tmp", "old tmp", "original's tmp"}
    assert made["live staging"].exists() and made["live tmp"].exists()


def test_daily_maintenance_cleans_leftovers(store: MemoryStore) -> None:
    made = _leftovers(store)
    run_daily_maintenance(store.paths, 30, T0)
    gone = {k for k, p in made.items() if not p.exists()}
    assert gone == {
        "dead staging",
        "dead tmp",
        "old tmp",
        "original's tmp",
        "index tmp",
        "index vectors-bb.npy",
    }
