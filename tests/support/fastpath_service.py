"""An engine service for the hook fast-path tests: ``hook-forward`` through the real
``memself.warm.service.run_forwarded`` with a scripted core, so the test needs no model.
Spawned engines load it through ``MEMSELF_ENGINE_SERVICE=tests.support.fastpath_service:make``."""

from __future__ import annotations

import os
from datetime import datetime

from memself.errors import InvalidInput
from memself.hosts.base import HookEvent, HookReply
from memself.paths import DataPaths

RECALLED_RULE = "发布前先跑冒烟测试"


def scripted_core(event: HookEvent, now: datetime, paths: DataPaths) -> HookReply:
    """What the engine answers: everything the hook process forwarded, visible in the text."""
    return HookReply(
        context=f"engine pid={os.getpid()} kind={event.kind.value} "
        f"prompt={event.prompt} cwd={event.cwd} now={now.isoformat()} "
        f"session={event.session_key}"
    )


class FastPathService:
    def __init__(self, paths: DataPaths) -> None:
        self.paths = paths

    def warm_up(self) -> None:
        pass

    def reload(self) -> None:
        pass

    def handle(self, op: str, payload: dict) -> dict:
        if op == "hook-forward":
            from memself.warm.service import run_forwarded

            return run_forwarded(payload, self.paths, scripted_core)
        if op == "recall":  # what a hook that runs in its own process asks for
            return {
                "rule": [{"id": "r1", "text": RECALLED_RULE, "score": 0.9, "confidence": 0.5}],
                "project": [],
            }
        raise InvalidInput(f"未知操作 {op}")


def make(paths: DataPaths) -> FastPathService:
    return FastPathService(paths)
