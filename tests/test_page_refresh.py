"""memories.html is not written by a write; the engine regenerates it after writes settle."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest

from memself import edits as memories
from memself.engine.location import RUNTIME_ENV
from memself.engine.server import EngineServer
from memself.page.listing import refresh_views
from memself.page.refresh import PageRefresher, page_is_stale, spawn_refresh
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from tests.support.engine_test_service import EngineTestService

NOW = datetime(2026, 12, 1, 9, 30, tzinfo=timezone.utc)


class FakeRun:
    """Stands in for the regeneration process: running until ``done`` is set."""

    def __init__(self) -> None:
        self.done = False

    def poll(self) -> int | None:
        return 0 if self.done else None


class Spawns:
    def __init__(self) -> None:
        self.runs: list[FakeRun] = []

    def __call__(self, paths: DataPaths) -> FakeRun:
        self.runs.append(FakeRun())
        return self.runs[-1]


def set_mtime(path: Path, seconds: int) -> None:
    os.utime(path, ns=(seconds * 10**9, seconds * 10**9))


def refresher(paths: DataPaths, spawns: Spawns, delay_s: float = 10.0) -> PageRefresher:
    return PageRefresher(paths, delay_s, spawn=spawns)  # type: ignore[arg-type]


def test_a_write_does_not_write_the_page() -> None:
    store = MemoryStore(DataPaths.default())
    added = store.add("回答一律使用中文", "rule", NOW)
    store.add("支付服务的本地端口是 8443", "project", NOW)
    memories.delete(store, [added.memory.id], NOW)
    store.restore(added.memory.id, NOW)
    assert not store.paths.html.exists()
    refresh_views(store.paths, NOW)  # what `memself open` and memory_list(open) call
    page = store.paths.html.read_text(encoding="utf-8")
    assert "回答一律使用中文" in page and "8443" in page


def test_changes_are_regenerated_once_they_settle() -> None:
    paths = DataPaths.default()
    paths.ensure()
    spawns = Spawns()
    page = refresher(paths, spawns)
    for now in (0.0, 30.0):
        page.tick(now)
    assert spawns.runs == []  # no memories, no page needed
    rule = paths.group_file("rule")
    rule.write_text('{"id":"mem-a","text":"规则甲"}\n', encoding="utf-8")
    page.tick(31.0)
    page.tick(40.0)
    assert spawns.runs == []  # not still for 10 s yet
    rule.write_text('{"id":"mem-a","text":"规则甲乙"}\n', encoding="utf-8")  # a burst continues
    page.tick(41.5)
    page.tick(51.0)
    assert spawns.runs == []
    page.tick(51.5)
    assert len(spawns.runs) == 1
    # A change while the regeneration runs waits for it, then gets its own run.
    paths.trash.write_text("", encoding="utf-8")
    page.tick(52.0)
    page.tick(70.0)
    assert len(spawns.runs) == 1
    spawns.runs[0].done = True
    page.tick(71.0)
    page.tick(80.0)
    assert len(spawns.runs) == 1
    page.tick(81.0)
    assert len(spawns.runs) == 2
    spawns.runs[1].done = True
    for now in (90.0, 200.0):
        page.tick(now)
    assert len(spawns.runs) == 2  # nothing changed since


def test_a_page_older_than_the_files_at_start_is_regenerated() -> None:
    paths = DataPaths.default()
    paths.ensure()
    rule = paths.group_file("rule")
    rule.write_text('{"id":"mem-a","text":"规则甲"}\n', encoding="utf-8")
    paths.html.write_text("旧页面", encoding="utf-8")
    set_mtime(rule, 1_700_000_000)
    set_mtime(paths.html, 1_700_000_100)
    assert not page_is_stale(paths)
    spawns = Spawns()
    fresh = refresher(paths, spawns)
    for now in (0.0, 100.0):
        fresh.tick(now)
    assert spawns.runs == []
    set_mtime(rule, 1_700_000_200)
    assert page_is_stale(paths)
    stale = refresher(paths, spawns)
    stale.tick(0.0)
    assert spawns.runs == []
    stale.tick(10.0)
    assert len(spawns.runs) == 1


def test_the_regeneration_process_writes_the_page() -> None:
    paths = DataPaths.default()
    MemoryStore(paths).add("提交前先跑 make lint", "rule", NOW)
    run = spawn_refresh(paths)
    assert run.wait(120) == 0
    page = paths.html.read_text(encoding="utf-8")
    assert "提交前先跑 make lint" in page and "生成于" in page
    assert not page_is_stale(paths)
    assert "page-refreshed" in paths.log_file.read_text(encoding="utf-8")


@pytest.fixture
def runtime_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="mse-", dir="/tmp"))  # short: sun_path is ~104 bytes
    monkeypatch.setenv(RUNTIME_ENV, str(base / "rt"))
    yield base / "rt"
    shutil.rmtree(base, ignore_errors=True)


def wait_for(predicate: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def test_the_engine_regenerates_the_page_after_writes(runtime_dir: Path) -> None:
    paths = DataPaths.default()
    paths.ensure()
    store = MemoryStore(paths)
    server = EngineServer(paths, idle_s=120.0, idle_tasks=(PageRefresher(paths, 0.3).tick,))
    assert server.start(EngineTestService(paths))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        store.add("回答一律使用中文", "rule", NOW)
        assert wait_for(lambda: paths.html.exists() and not page_is_stale(paths), 120)
        assert "回答一律使用中文" in paths.html.read_text(encoding="utf-8")
        store.add("支付服务的本地端口是 8443", "project", NOW)
        assert wait_for(lambda: "8443" in paths.html.read_text(encoding="utf-8"), 120)
    finally:
        server.shutdown("test")
        thread.join(10)
    assert not thread.is_alive()
