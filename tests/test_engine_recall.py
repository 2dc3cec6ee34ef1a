"""The real recall service in a real engine process with the real offline model.

One engine per module (loading the model costs seconds); each test uses its own memories.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

from memself.engine.client import call_engine, stop_engine
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore

ENTRY = Path(__file__).resolve().parent.parent / "hooks" / "entry.py"
NOW = datetime(2026, 11, 30, 9, 0, tzinfo=timezone.utc)


def _hook(payload: dict, host: str = "claude") -> dict | None:
    result = subprocess.run(
        [sys.executable, "-I", "-S", str(ENTRY), "--agent", host],
        input=json.dumps(payload).encode(),
        capture_output=True,
        timeout=60,
        env=os.environ.copy(),
    )
    assert result.returncode == 0
    return json.loads(result.stdout) if result.stdout.strip() else None


def test_recall_finds_the_relevant_fact_and_not_for_unrelated(e5_engine_home: DataPaths) -> None:
    store = MemoryStore(e5_engine_home)
    fact = store.create(
        "支付页新流程的灰度开关是 pay_new_flow，在配置中心 payment 命名空间下", "project", NOW.replace(day=1)
    )
    store.create("回答和代码注释里都不要用 emoji", "rule", NOW.replace(day=1))
    question = {"text": "支付页新流程的灰度开关叫什么", "now": NOW.isoformat()}
    hits = call_engine(e5_engine_home, "recall", question, timeout_s=120)
    assert [h["id"] for h in hits["project"]] == [fact.id]
    assert hits["project"][0]["confidence"] == 0.55  # as it will be once the hook delivered it
    assert store.get(fact.id).confidence == 0.5  # the hook rewards what reached the host
    store.reward_recall([fact.id], NOW)
    again = call_engine(
        e5_engine_home,
        "recall",
        {"text": "支付页新流程的灰度开关叫什么", "now": NOW.isoformat()},
        timeout_s=60,
    )
    assert again["project"][0]["confidence"] == 0.55  # once per day
    unrelated = call_engine(
        e5_engine_home, "recall", {"text": "讲讲 TCP 的拥塞控制算法", "now": NOW.isoformat()}, timeout_s=60
    )
    assert unrelated["project"] == []


def test_new_memory_is_indexed_and_nearest_serves_dedup(e5_engine_home: DataPaths) -> None:
    store = MemoryStore(e5_engine_home)
    call_engine(e5_engine_home, "recall", {"text": "随便问一句", "now": NOW.isoformat()}, timeout_s=120)
    added = store.create("Go 的错误要用 fmt.Errorf 加 %w 包装上下文再返回", "rule", NOW.replace(day=1))
    nearest = call_engine(e5_engine_home, "nearest", {"text": "Go 里面错误怎么包装", "k": 3}, timeout_s=60)
    assert nearest["items"][0]["id"] == added.id


def test_prompt_hook_through_the_warm_engine(e5_engine_home: DataPaths) -> None:
    store = MemoryStore(e5_engine_home)
    store.create(
        "司机端 App 的热修复用 Shorebird，补丁脚本是 driver-app 仓库的 scripts/patch.sh",
        "project",
        NOW.replace(day=1),
    )
    call_engine(e5_engine_home, "ping", {}, timeout_s=5)
    call_engine(e5_engine_home, "recall", {"text": "预热", "now": NOW.isoformat()}, timeout_s=120)
    reply = _hook(
        {
            "hook_event_name": "UserPromptSubmit",
            "session_id": "s1",
            "prompt_id": "p1",
            "prompt": "司机端的热修复补丁怎么发出去",
        }
    )
    context = reply["hookSpecificOutput"]["additionalContext"]
    assert "## 项目事实" in context and "scripts/patch.sh" in context
    log = e5_engine_home.log_file.read_text()
    assert '"note": "engine"' in log


def test_the_engine_runs_lean(e5_engine_home: DataPaths) -> None:
    """No torch, transformers or sentence-transformers in a running engine: not imported (its
    status says) and not mapped (its /proc maps show no libtorch)."""
    call_engine(e5_engine_home, "recall", {"text": "预热", "now": NOW.isoformat()}, timeout_s=120)
    status = call_engine(e5_engine_home, "status", {}, timeout_s=10)
    service = status["service"]
    assert service["encoder"] == "LeanEncoder"
    assert service["heavy_modules"] == []
    assert "/prepared/" in service["prepared"]
    maps = Path(f"/proc/{status['pid']}/maps").read_text()
    assert "onnxruntime" in maps
    assert "libtorch" not in maps and "torch/lib" not in maps


# Real-engine start within the hook's deadline: a loaded machine misses it. The full group checks
# it here; bench/bench_hooks.py measures it (cold prompts that carried their recall).
@pytest.mark.full
def test_first_prompt_with_no_engine_gets_its_recall(e5_engine_home: DataPaths) -> None:
    """The first prompt of a working session meets no engine (it exits when idle): the hook
    starts one and waits for it within its deadline, so this very prompt carries the fact."""
    store = MemoryStore(e5_engine_home)
    fact = store.create("订单服务的压测环境在 perf-03，用之前要在测试群里报备", "project", NOW.replace(day=1))
    call_engine(e5_engine_home, "recall", {"text": "预热", "now": NOW.isoformat()}, timeout_s=120)
    assert stop_engine(e5_engine_home) is not None  # an engine that had indexed it, now gone
    from memself.engine.client import engine_status

    assert engine_status(e5_engine_home) is None
    reply = _hook(
        {
            "hook_event_name": "beforeSubmitPrompt",
            "conversation_id": "c1",
            "generation_id": "g1",
            "prompt": "我想对订单服务做个压测，去哪个环境",
        },
        host="cursor",
    )
    assert reply is not None and fact.text in reply["additional_context"]
    runs = [line for line in e5_engine_home.log_file.read_text().splitlines() if " hook-run " in line]
    assert '"note": "engine"' in runs[-1]


def test_cli_recall_asks_the_running_engine(e5_engine_home: DataPaths) -> None:
    """``memself recall`` with an engine running: answered by the engine (one more request in its
    count), same explanation as in process, and nothing rewarded."""
    store = MemoryStore(e5_engine_home)
    fact = store.create(
        "日志平台是自建的 Loki，地址 logs.corp.internal，查线上日志用它", "project", NOW.replace(day=1)
    )
    call_engine(e5_engine_home, "recall", {"text": "预热", "now": NOW.isoformat()}, timeout_s=120)
    before = call_engine(e5_engine_home, "status", {}, timeout_s=10)["requests"]
    result = subprocess.run(
        [sys.executable, "-m", "memself", "recall", "线上日志去哪里查", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ.copy(),
    )
    assert result.returncode == 0, result.stderr
    hits = json.loads(result.stdout)
    assert [h["id"] for h in hits["project"]] == [fact.id]
    assert hits["project"][0]["confidence"] == 0.5  # a preview never rewards
    after = call_engine(e5_engine_home, "status", {}, timeout_s=10)["requests"]
    assert after >= before + 1  # the CLI's preview went to the engine
    text = subprocess.run(
        [sys.executable, "-m", "memself", "recall", "线上日志去哪里查"],
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ.copy(),
    )
    assert "本轮的线" in text.stdout and "logs.corp.internal" in text.stdout
    assert store.get(fact.id).confidence == 0.5


def test_applies_when_views_are_indexed_scored_and_follow_edits(e5_engine_home: DataPaths) -> None:
    from memself.index.sync import VectorIndex, view_row_id

    store = MemoryStore(e5_engine_home)
    text = "订单服务的压测环境在 perf-03，用之前要在测试群里报备"
    fact = store.create(
        text, "project", NOW.replace(day=1), applies_when=["订单服务要跑个性能测试", "压一下下单接口的 QPS"]
    )
    prompt = {"text": "帮我压一下下单接口的 QPS，看看能扛多少"}
    detail = call_engine(e5_engine_home, "preview", prompt, timeout_s=120)
    (hit,) = detail["groups"]["project"]["hits"]
    assert hit["id"] == fact.id and hit["via"] == "压一下下单接口的 QPS" and hit["offset"] > 0
    index = VectorIndex.for_paths(e5_engine_home)
    assert {fact.id, view_row_id(fact.id, 0), view_row_id(fact.id, 1)} <= set(index.ids)
    # An edit of the requests: the engine re-syncs; the removed request's row is gone, the
    # memory is now scored by its text alone and this prompt no longer reaches it by that request.
    store.replace(fact.id, text, NOW.replace(day=2), applies_when=["订单服务要跑个性能测试"])
    detail = call_engine(e5_engine_home, "preview", prompt, timeout_s=60)
    vias = [h["via"] for h in detail["groups"]["project"]["hits"]]
    assert "压一下下单接口的 QPS" not in vias
    index.reload()
    assert view_row_id(fact.id, 1) not in index.ids and view_row_id(fact.id, 0) in index.ids
