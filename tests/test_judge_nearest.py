"""The judge's nearest-memories adapter over the engine's ``nearest`` op."""

from __future__ import annotations

import json

import pytest

from memself.judge.worker import engine_nearest
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from tests.support.judge_helpers import NOW


def test_empty_library_never_asks_the_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    import memself.engine.client as client

    def boom(*args, **kwargs):
        raise AssertionError("engine asked")

    monkeypatch.setattr(client, "call_engine", boom)
    assert engine_nearest(MemoryStore(DataPaths.default()))("回答问题时使用中文", 3, "") == []


def test_maps_engine_hits_to_active_memories(monkeypatch: pytest.MonkeyPatch) -> None:
    import memself.engine.client as client

    paths = DataPaths.default()
    store = MemoryStore(paths)
    a = store.create("回答问题时一律使用中文", "rule", NOW)
    b = store.create("ImageLoader 负责图片加载与缓存", "project", NOW)
    dead = store.create("一条已经废弃的规则正文", "rule", NOW)
    path = paths.group_file("rule")
    records = [json.loads(x) for x in path.read_text().splitlines()]
    for r in records:
        if r["id"] == dead.id:
            r["deprecated"] = True
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    calls = []

    def fake(paths_arg, op, payload, timeout_s):
        calls.append((op, payload))
        return {
            "items": [
                {"id": dead.id, "score": 0.9},
                {"id": "mem-gone", "score": 0.8},
                {"id": b.id, "score": 0.5},
                {"id": a.id, "score": 0.4},
            ]
        }

    monkeypatch.setattr(client, "call_engine", fake)
    pairs = engine_nearest(store)("回答问题时使用中文", 3, "")
    assert [(m.id, s) for m, s in pairs] == [(b.id, 0.5), (a.id, 0.4)]
    assert calls == [("nearest", {"text": "回答问题时使用中文", "k": 3, "workspace": ""})]
