"""``memself engine stop`` while the engine waits for a model preparation it started (first use,
model not prepared): the preparation child ends with the engine, and no temporary file stays."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from memself.engine.client import spawn_engine, stop_engine
from memself.model.catalog import OFFLINE_MODEL
from memself.paths import DataPaths


def children_of(pid: int) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(name))
    return found


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process table from /proc")
def test_stop_ends_the_preparation_child_and_its_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache, scratch = tmp_path / "empty-model-cache", tmp_path / "tmp"
    cache.mkdir()
    scratch.mkdir()
    monkeypatch.setenv("MEMSELF_MODEL_CACHE", str(cache))  # nothing prepared: the engine prepares
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setenv("MEMSELF_RUNTIME_DIR", str(Path("/tmp") / f"msp-{os.getpid()}"))
    monkeypatch.delenv("MEMSELF_ENGINE_SERVICE", raising=False)
    paths = DataPaths.default()
    paths.ensure()
    paths.config.write_text(json.dumps({"model": OFFLINE_MODEL}), encoding="utf-8")
    engine = spawn_engine(paths)
    assert engine is not None
    child = None
    try:
        deadline = time.monotonic() + 60
        while child is None and time.monotonic() < deadline:
            child = next((p for p in children_of(engine) if "memself.model.prepare" in cmdline(p)), None)
            time.sleep(0.1)
        assert child is not None, "the engine started no preparation"
        assert list(scratch.glob("memself-prepare-*"))  # its error file exists while it runs
        time.sleep(1.0)  # well into its start (reading the weights)
        stop_engine(paths, timeout_s=20)
        stopped_at = time.monotonic()
        while alive(child) and time.monotonic() - stopped_at < 2.0:
            time.sleep(0.05)
        assert not alive(child), f"preparation {child} outlived the engine: {cmdline(child)}"
        assert list(scratch.glob("memself-prepare-*")) == []
        assert [p.name for p in cache.rglob(".tmp-*")] == []
    finally:
        for pid in (child, engine):
            if pid is not None and alive(pid):
                os.kill(pid, 9)
