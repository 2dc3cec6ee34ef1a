"""A prompt carrying a lone surrogate (JSON ``"\\ud83d"``, half an emoji cut by a client) is answered
as usual, through the real hook entry, on both paths: in the hook process (an engine still
warming up) and through a warm engine with the real model (recall)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest

from memself.config import set_config_value
from memself.engine.client import EngineClient, call_engine, ensure_started, stop_engine
from memself.hosts import HOSTS
from memself.hosts.base import EventKind
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from memself.text import messages as texts
from tests.support.engine_test_service import WARM_UP_ENV
from tests.support.hookproc import hook_data, hook_runs, run_entry

__all__ = ["hook_data"]

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=timezone.utc)


def payload(host: str, prompt_json: str) -> bytes:
    """The prompt is spliced in as JSON source, so its escapes reach the hook unchanged."""
    session = f"sur-{host}"
    head = json.dumps(
        {
            "hook_event_name": HOSTS[host].EVENT_NAMES[EventKind.PROMPT_SUBMIT],
            "session_id": session,
            "conversation_id": session,
            "cwd": "/tmp",
            "prompt_id": "p1",
            "generation_id": "g1",
        }
    )
    return (head[:-1] + ', "prompt": ' + prompt_json + "}").encode()


def context_of(host: str, answer: dict | None) -> str:
    assert answer is not None, "the hook answered nothing"
    if host == "cursor":
        return answer["additional_context"]
    return answer["hookSpecificOutput"]["additionalContext"]


@pytest.mark.parametrize("host", list(HOSTS))
def test_local_path_answers_a_lone_surrogate(
    host: str, hook_data: DataPaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An engine that is still warming up: the hook runs the core in its own process and asks
    the engine for the hook and for recall on the way (both answer "not ready")."""
    monkeypatch.setenv(WARM_UP_ENV, "60")
    ensure_started(hook_data)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if EngineClient(hook_data).ping(0.5).get("ready") is False:
                break
        except Exception:
            time.sleep(0.1)
    # Cursor's own timeout leaves a loaded machine too little for a local run that imports the
    # core; what this test asks about is the surrogate, not the deadline.
    proc = run_entry(host, payload(host, r'"回答用什么语言\ud83d，还有\udc00呢"'), host_timeout_s=30)
    assert proc.rc == 0
    context = context_of(host, proc.answer())
    assert context == texts.DEPOSITION_OFF  # the reminder, as for any prompt without recall
    [run] = [r for r in hook_runs(hook_data) if r["host"] == host]
    assert "error" not in run, run
    assert run["note"].startswith("local:")


@pytest.fixture
def warm_engine(model_cache: Path, hook_data: DataPaths) -> Iterator[DataPaths]:
    set_config_value(hook_data, "model", "multilingual-e5-small")
    os.environ.pop("MEMSELF_ENGINE_SERVICE", None)
    MemoryStore(hook_data).create("回答问题时一律使用简体中文", "rule", NOW)
    call_engine(hook_data, "recall", {"text": "预热", "now": NOW.isoformat()}, timeout_s=180)
    yield hook_data
    stop_engine(hook_data)


def test_fast_path_answers_a_lone_surrogate_with_recall(warm_engine: DataPaths) -> None:
    for host in HOSTS:
        proc = run_entry(host, payload(host, r'"回答问题时应该使用什么语言\ud83d"'))
        assert proc.rc == 0
        context = context_of(host, proc.answer())
        assert context.startswith(texts.RECALL_HEADER) and "回答问题时一律使用简体中文" in context
        assert context.endswith(texts.DEPOSITION_OFF)
        [run] = [r for r in hook_runs(warm_engine) if r["host"] == host]
        assert "error" not in run and run.get("note") == "engine", run
