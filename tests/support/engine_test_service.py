"""A small service for the engine tests: the real recall service needs the model, these tests
exercise the engine around it (lifecycle, sockets, limits). Spawned engines load it through
``MEMSELF_ENGINE_SERVICE=tests.support.engine_test_service:make`` with the repo root on PYTHONPATH."""

from __future__ import annotations

import os
import threading
import time

from memself.errors import InvalidInput
from memself.paths import DataPaths

WARM_UP_ENV = "ENGINE_TEST_WARM_UP_S"
WARM_UP_FAIL_ENV = "ENGINE_TEST_WARM_UP_FAIL"


class EngineTestService:
    def __init__(self, paths: DataPaths, warm_gate: threading.Event | None = None) -> None:
        self.paths = paths
        self.warm_gate = warm_gate
        self.reloads = 0
        self.warm_ups = 0

    def warm_up(self) -> None:
        self.warm_ups += 1
        if self.warm_gate is not None:
            self.warm_gate.wait(10)
        time.sleep(float(os.environ.get(WARM_UP_ENV, "0")))
        marker = os.environ.get(WARM_UP_FAIL_ENV, "")
        if marker and os.path.exists(marker):
            raise RuntimeError("模型文件缺失（测试）")

    def reload(self) -> None:
        self.reloads += 1

    def handle(self, op: str, payload: dict) -> dict:
        if op == "echo":
            return {"echo": payload, "pid": os.getpid(), "reloads": self.reloads}
        if op == "recall":
            return {
                "rules": [{"id": "r1", "text": "回答用中文", "score": 0.9}],
                "text_len": len(payload.get("text", "")),
                "pid": os.getpid(),
            }
        if op == "sleep":
            time.sleep(float(payload.get("s", 1)))
            return {"slept": payload.get("s", 1)}
        if op == "big":
            return {"blob": "x" * int(payload["n"])}
        if op == "fail":
            raise InvalidInput("测试用的错误")
        if op == "boom":
            raise RuntimeError("secret-looking internal detail")
        raise InvalidInput(f"未知操作：{op}")

    def describe(self) -> dict:
        return {"name": "engine-test-service", "reloads": self.reloads}


class HeldService(EngineTestService):
    """For in-process servers: its ``hold`` op answers only once the test sets ``release``, and
    ``holding`` is set while a hold is inside the service. A test waits on these, not on time."""

    def __init__(self, paths: DataPaths) -> None:
        super().__init__(paths)
        self.holding = threading.Event()
        self.release = threading.Event()

    def handle(self, op: str, payload: dict) -> dict:
        if op == "hold":
            self.holding.set()
            if not self.release.wait(120):
                raise RuntimeError("the test never released the hold")
            return {"held": True}
        return super().handle(op, payload)


def make(paths: DataPaths) -> EngineTestService:
    return EngineTestService(paths)
