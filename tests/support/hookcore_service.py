"""An engine service that runs the real hook core (``memself.hook.core.handle``) for forwarded
hooks, with a recall that needs no model: the input filter, the judge start, the store and the
rendering are the product's own. Spawned engines load it through
``MEMSELF_ENGINE_SERVICE=tests.support.hookcore_service:make``."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from memself.hosts.base import HookEvent, HookReply
from memself.paths import DataPaths
from tests.support.engine_test_service import EngineTestService

RECALLED_RULE = "回答用中文"


def recall(text: str, now: datetime, workspace: str) -> dict[str, Any]:
    return {"rule": [{"id": "r1", "text": RECALLED_RULE, "score": 0.9, "confidence": 0.5}], "project": []}


class HookCoreService(EngineTestService):
    def handle(self, op: str, payload: dict) -> dict:
        if op == "hook-forward":
            from memself.hook.core import handle
            from memself.warm.service import run_forwarded

            def core(event: HookEvent, now: datetime, paths: DataPaths) -> HookReply:
                return handle(event, now, paths, recall=recall, in_engine=True)

            return run_forwarded(payload, self.paths, core)
        return super().handle(op, payload)


def make(paths: DataPaths) -> HookCoreService:
    return HookCoreService(paths)
