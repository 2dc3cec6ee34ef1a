"""The product's recall service (``memself.warm.service.RecallService``) with its scorer swapped
for a slow stand-in: every active rule is a hit, after ``SLOW_RECALL_S`` seconds. Everything else
(the hook core, the gate's numbers, the rewards and when they are written) is the product's own,
so a test can make the engine too slow for the hook without loading a model. Spawned engines load
it through ``MEMSELF_ENGINE_SERVICE=tests.support.slow_recall_service:make``."""

from __future__ import annotations

import os
import time
from typing import Any

from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from memself.warm.service import RecallService

DELAY_ENV = "SLOW_RECALL_S"
OP_SETTLE = "settle"  # a service op: answered once every earlier op has left the service lock


class _Result:
    def __init__(self, hits: list[dict[str, Any]]) -> None:
        self.hits = hits

    def to_json(self) -> dict[str, list[dict[str, Any]]]:
        return {"rule": [dict(h) for h in self.hits], "project": []}


class _SlowRecaller:
    def __init__(self, paths: DataPaths) -> None:
        self.paths = paths

    def recall(
        self,
        text: str,
        pool: object,
        matrix: object,
        params: object,
        matrix_key: object = None,
        workspace: str | None = None,
    ) -> _Result:
        time.sleep(float(os.environ.get(DELAY_ENV, "0")))
        hits = [
            {"id": m.id, "text": m.text, "score": 0.9, "confidence": m.confidence}
            for m in MemoryStore(self.paths).active("rule")
        ]
        return _Result(hits)


class _Index:
    matrix = None
    generation = 0


class SlowRecallService(RecallService):
    def warm_up(self) -> None:
        pass

    def reload(self) -> None:
        pass

    def _loaded(self) -> Any:
        return _SlowRecaller(self.paths), None, _Index()

    def handle(self, op: str, payload: dict[str, Any]) -> dict[str, Any]:
        if op == OP_SETTLE:
            return {}
        return super().handle(op, payload)


def make(paths: DataPaths) -> SlowRecallService:
    return SlowRecallService(paths)
