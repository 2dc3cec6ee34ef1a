"""An engine whose reload after a data change failed does not call itself simply "ready".

It keeps serving what it loaded before (stale data beats no recall), and ``engine status`` and
doctor say the reload failed and why, until a later reload succeeds. The fault is real: the rule
file replaced by a folder, so reading it fails in the engine.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest

from memself.config import set_config_value
from memself.doctor import check_engine
from memself.engine.client import call_engine, engine_status, stop_engine
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from tests.support.backlog_helpers import start_engine
from tests.support.cli import memself

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=timezone.utc)
RULE = "Go 的错误要用 fmt.Errorf 加 %w 包装"
PROMPT = "帮我看看这段 Go 代码"


@pytest.fixture
def engine_paths(model_cache: Path) -> Iterator[DataPaths]:
    paths = DataPaths.default()
    paths.ensure()
    os.environ.pop("MEMSELF_ENGINE_SERVICE", None)
    set_config_value(paths, "model", "multilingual-e5-small")
    MemoryStore(paths).create(RULE, "rule", NOW.replace(day=1))
    try:
        yield paths
    finally:
        stop_engine(paths)


def _recalled(paths: DataPaths) -> list[str]:
    """What the engine would recall for ``PROMPT`` (the preview op: it reads no memory file)."""
    detail = call_engine(paths, "preview", {"text": PROMPT}, timeout_s=120)
    return [hit["text"] for hit in detail["groups"]["rule"]["hits"]]


def test_a_failed_reload_is_reported_until_one_succeeds(engine_paths: DataPaths, tmp_path: Path) -> None:
    paths = engine_paths
    start_engine(paths)
    assert _recalled(paths) == [RULE]
    assert (engine_status(paths) or {}).get("reload_error") is None

    rules = paths.group_file("rule")
    shutil.move(rules, tmp_path / "rule.jsonl")
    rules.mkdir()
    assert _recalled(paths) == [RULE]  # what it loaded before
    status = engine_status(paths) or {}
    assert status["state"] == "ready" and "rule.jsonl" in str(status.get("reload_error")), status
    shown = memself("engine", "status")
    assert "就绪，但上次重新加载失败" in shown.stdout, shown.stdout
    assert "数据变化后重新加载失败" in shown.stdout and "rule.jsonl" in shown.stdout
    check = check_engine(paths, wait_s=60)
    assert check.ok is False and "重新加载失败" in check.summary, check

    rules.rmdir()
    shutil.move(tmp_path / "rule.jsonl", rules)
    assert _recalled(paths) == [RULE]
    assert (engine_status(paths) or {}).get("reload_error") is None
    assert "重新加载失败" not in memself("engine", "status").stdout
    assert check_engine(paths, wait_s=60).ok is True
