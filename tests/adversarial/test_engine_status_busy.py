"""``memself engine status`` must not call an engine "not running" when it is alive but cannot
answer: every connection slot taken, or stuck in one long request. The user would start
looking for a crash (or start a second engine by hand) instead of waiting."""

from __future__ import annotations

import json
import os
import signal
import threading

from click.testing import CliRunner

from memself.cli import main
from memself.engine.client import EngineClient, call_engine
from memself.paths import DataPaths
from tests.support.engine_test_service import HeldService
from tests.test_engine import in_process, paths, runtime_dir, wait_for

__all__ = ["paths", "runtime_dir"]

NOT_RUNNING = "召回引擎未运行"


def status_output(*args: str) -> str:
    result = CliRunner().invoke(main, ["engine", "status", *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_status_of_an_engine_with_every_slot_taken(paths: DataPaths) -> None:
    client = EngineClient(paths)
    service = HeldService(paths)
    answers: list[dict] = []
    with in_process(paths, service, max_connections=2) as server:
        holders = [
            threading.Thread(target=lambda: answers.append(client.request("hold", {}, 120.0)))
            for _ in range(2)
        ]
        # The two holders take both slots (the start-up ping's connection gone first): one inside
        # the service, one waiting for it. They are let go only after status and stop have run.
        wait_for(lambda: server._active == 0, 30)
        holders[0].start()
        assert service.holding.wait(30)
        holders[1].start()
        wait_for(lambda: server._active == 2, 30)
        try:
            text = status_output()
            data = json.loads(status_output("--json"))
            stop = CliRunner().invoke(main, ["engine", "stop"])
        finally:
            service.release.set()
            for holder in holders:
                holder.join(60)
    assert NOT_RUNNING not in text, text
    assert "繁忙" in text and str(server.pid) in text, text
    assert data["running"] is True and data["state"] == "busy" and data["pid"] == server.pid
    assert answers == [{"held": True}] * 2  # the requests that held the slots were answered
    assert stop.exit_code == 1 and "繁忙" in stop.output and NOT_RUNNING not in stop.output


def test_status_of_an_engine_that_does_not_answer(paths: DataPaths) -> None:
    pid = call_engine(paths, "echo", {}, timeout_s=15)["pid"]
    os.kill(pid, signal.SIGSTOP)  # alive, holding its lock and socket, answering nothing
    try:
        text = status_output()
        data = json.loads(status_output("--json"))
    finally:
        os.kill(pid, signal.SIGCONT)
    assert NOT_RUNNING not in text, text
    assert "没有响应" in text and str(pid) in text, text
    assert data["running"] is True and data["state"] == "unresponsive" and data["pid"] == pid
    assert EngineClient(paths).ping()["pid"] == pid  # and it serves again once resumed
