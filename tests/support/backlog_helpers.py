"""A store of many memories with no vectors, and a real engine encoding it (the offline model)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memself.config import set_config_value
from memself.engine.client import engine_status, ensure_started, stop_engine
from memself.paths import DataPaths

ENTRY = Path(__file__).resolve().parents[2] / "hooks" / "entry.py"
FACT = "支付灰度开关是 pay_new_flow"
# The newest memory of a store: written after every filler fact. The backlog encodes the newest
# texts first.
FACT_STAMP = "2026-11-20T09:30:00.000Z"
PROMPT = "支付页新流程的灰度开关叫什么"
_SERVICES = ["订单", "库存", "用户中心", "消息推送", "风控", "结算", "搜索", "推荐", "网关"]
_THINGS = ["超时时间", "重试次数", "连接池大小", "缓存过期时间", "限流阈值", "日志级别"]


@pytest.fixture
def engine_home(model_cache: Path) -> Iterator[DataPaths]:
    """The test's data directory for a real engine on the prepared model, stopped at the end."""
    paths = DataPaths.default()
    os.environ.pop("MEMSELF_ENGINE_SERVICE", None)
    yield paths
    stop_engine(paths)


def filler(count: int, start: int = 0) -> list[str]:
    """Distinct project facts, each longer than ``FACT``."""
    return [
        f"{_SERVICES[i % len(_SERVICES)]}服务第 {i} 号集群的{_THINGS[i // 9 % len(_THINGS)]}写在部署脚本里，"
        f"当前取值 {i % 97}"
        for i in range(start, start + count)
    ]


def record(mem_id: str, text: str, stamp: str = "2026-11-01T08:00:00.000Z") -> dict[str, Any]:
    return {
        "id": mem_id,
        "text": text,
        "confidence": 0.7,
        "category": "project",
        "evidence": "",
        "firstSeen": stamp,
        "lastSeen": stamp,
        "deprecated": False,
        "createdAt": stamp,
    }


def write_unencoded_store(paths: DataPaths, count: int, fact: str = FACT) -> list[str]:
    """``count - 1`` filler facts and then ``fact`` (id ``fact``, created last), no index;
    returns the ids."""
    paths.ensure()
    set_config_value(paths, "model", "multilingual-e5-small")
    records = [record(f"fill{i:05d}", t) for i, t in enumerate(filler(count - 1))]
    records.append(record("fact", fact, FACT_STAMP))
    lines = [json.dumps(r, ensure_ascii=False) + "\n" for r in records]
    paths.group_file("project").write_text("".join(lines), encoding="utf-8")
    return [str(r["id"]) for r in records]


def wait_status(paths: DataPaths, until, timeout_s: float = 180.0) -> dict[str, Any]:
    """Poll ``status`` until ``until(status)``; the status it held for."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = engine_status(paths, 5.0)
        if status is not None and until(status):
            return status
        time.sleep(0.1)
    raise AssertionError(f"the engine never reached the state asked for: {engine_status(paths)}")


def start_engine(paths: DataPaths) -> dict[str, Any]:
    assert ensure_started(paths) in ("spawned", "running", "starting")
    return wait_status(paths, lambda s: s.get("ready"))


def backlog_of(status: dict[str, Any]) -> dict[str, Any] | None:
    return (status.get("service") or {}).get("backlog")


def prompt_hook(prompt: str = PROMPT) -> str:
    """The prompt hook as Claude Code runs it; the injected context ("" when none)."""
    payload = {"hook_event_name": "UserPromptSubmit", "session_id": "s1", "prompt_id": "p1", "prompt": prompt}
    result = subprocess.run(
        [sys.executable, "-I", "-S", str(ENTRY), "--agent", "claude"],
        input=json.dumps(payload).encode(),
        capture_output=True,
        timeout=60,
        env=os.environ.copy(),
    )
    assert result.returncode == 0
    if not result.stdout.strip():
        return ""
    reply = json.loads(result.stdout)
    return str((reply.get("hookSpecificOutput") or {}).get("additionalContext", ""))
