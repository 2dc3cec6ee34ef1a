"""The host-neutral hook core: session start injection, prompt reminders, plugin traffic, disabled."""

from __future__ import annotations

import json

import pytest

from memself.config import set_config_value
from memself.hook.core import handle
from memself.hosts.base import EventKind, HookEvent
from memself.judge.credentials import write_api_key
from memself.paths import DataPaths
from tests.support.helpers import T0, days, make_store, record, write_records


def event(kind: EventKind, host: str = "codebuddy", prompt: str = "", session: str = "s1") -> HookEvent:
    return HookEvent(host, kind, "", session, "", prompt, "/work", False)


@pytest.fixture(autouse=True)
def no_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep these unit tests from spawning a real engine; the engine has its own tests."""
    monkeypatch.setattr("memself.engine.client.ensure_started", lambda *a, **k: None)
    monkeypatch.setattr("memself.engine.client.recall_or_none", lambda *a, **k: None)


def test_session_start_lists_top_50_active_rules_and_leaves_file_alone() -> None:
    store = make_store()
    rules = [record(f"r{i}", f"第 {i:02d} 条规则的正文", 0.5 + i * 0.001, last=T0) for i in range(52)]
    rules.append(record("dep", "已经废弃的规则正文", 0.9, deprecated=True, last=T0))
    write_records(store, "rule", rules)
    DataPaths.default().decay_state.write_text(json.dumps({"lastRunDate": "2026-11-02"}))
    before = store.paths.group_file("rule").read_bytes()
    reply = handle(event(EventKind.SESSION_START), T0, store.paths)
    text = reply.context
    assert "第 51 条规则的正文" in text and "第 00 条规则的正文" not in text
    assert "第 01 条规则的正文" not in text and "已经废弃" not in text
    assert "（其余 2 条按置信度截断）" in text and "共 52 条" in text
    assert "记忆沉淀未启用" in text  # no judge configured: the boundary says deposition is off
    assert text.index("第 51 条") < text.index("第 50 条")  # confidence order
    assert store.paths.group_file("rule").read_bytes() == before  # no reward for injection


def test_session_start_runs_daily_maintenance_first() -> None:
    store = make_store()
    write_records(store, "rule", [record("a", "很久没用的规则", 0.9, last=T0 - days(40))])
    reply = handle(event(EventKind.SESSION_START), T0, store.paths)
    assert "很久没用的规则（置信度 0.85）" in reply.context


def configure_judge(paths: DataPaths) -> None:
    set_config_value(paths, "sideApiBase", "http://127.0.0.1:9")
    set_config_value(paths, "sideApiModel", "judge")
    write_api_key(paths, "sk-test-key-000", "http://127.0.0.1:9")


def test_session_start_boundary_when_judge_configured() -> None:
    store = make_store()
    configure_judge(store.paths)
    text = handle(event(EventKind.SESSION_START), T0, store.paths).context
    assert "后台自动提取" in text and "MEMORY_CONFIRM_V1" in text
    claude = handle(event(EventKind.SESSION_START, host="claude"), T0, store.paths).context
    assert "后台自动提取" in claude and "不影响 Claude Code 自带的记忆" in claude


def test_claude_session_start_respects_10000_chars() -> None:
    store = make_store()
    write_records(
        store, "rule", [record(f"r{i}", f"规则{i:02d}" + "很长的正文" * 60, 0.9, last=T0) for i in range(50)]
    )
    reply = handle(event(EventKind.SESSION_START, host="claude"), T0, store.paths)
    assert len(reply.context) <= 10_000
    assert "因注入长度限制未列出" in reply.context


def test_empty_rules_and_disabled_plugin() -> None:
    store = make_store()
    reply = handle(event(EventKind.SESSION_START), T0, store.paths)
    assert "（暂无）" in reply.context
    set_config_value(store.paths, "enabled", "false")
    write_records(store, "rule", [record("a", "很久没用的规则", 0.9, last=T0 - days(40))])
    assert handle(event(EventKind.SESSION_START), T0 + days(1), store.paths).empty
    assert not store.paths.decay_state.exists() or "2026-11-03" not in store.paths.decay_state.read_text()
    assert handle(event(EventKind.PROMPT_SUBMIT, prompt="帮我看看这个函数怎么改"), T0, store.paths).empty


def test_prompt_without_judge_gets_deposition_off_notice() -> None:
    store = make_store()
    reply = handle(event(EventKind.PROMPT_SUBMIT, prompt="以后回答都用中文，记住"), T0, store.paths)
    assert reply.context.startswith("记忆沉淀未启用")
    assert "memself setup" in reply.context


def test_legacy_blocking_config_gets_its_own_notice() -> None:
    store = make_store()
    store.paths.config.write_text(json.dumps({"sideJudge": False}))
    reply = handle(event(EventKind.PROMPT_SUBMIT, prompt="以后回答都用中文，记住"), T0, store.paths)
    assert "阻塞模式" in reply.context and "memself setup sidepath" in reply.context


def test_prompt_with_judge_configured_gets_reminder(monkeypatch: pytest.MonkeyPatch) -> None:
    store = make_store()
    configure_judge(store.paths)
    started = []
    monkeypatch.setattr("memself.judge.start.maybe_start_judge", lambda *a, **k: started.append(a))
    reply = handle(event(EventKind.PROMPT_SUBMIT, prompt="帮我看看这个函数怎么改"), T0, store.paths)
    assert reply.context.startswith("记忆由 memory-self-evolution 插件在后台判断")
    assert len(started) == 1
    claude = handle(
        event(EventKind.PROMPT_SUBMIT, host="claude", prompt="帮我看看这个函数怎么改"), T0, store.paths
    )
    assert "不影响 Claude Code 自带的记忆" in claude.context


@pytest.mark.parametrize(
    "prompt",
    [
        "",
        "MEMORY_CONFIRM_V1\n请弹窗",
        "Stop hook: MEMORY_CONFIRM_V1",
        "<question_answer>落成</question_answer>",
    ],
)
def test_plugin_traffic_gets_nothing(prompt: str) -> None:
    store = make_store()
    assert handle(event(EventKind.PROMPT_SUBMIT, prompt=prompt), T0, store.paths).empty


def test_recall_hits_are_rendered_in_two_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    store = make_store()
    result = {
        "rule": [{"id": "a", "text": "Go 错误用 %w 包装", "score": 0.41, "confidence": 0.55}],
        "project": [{"id": "p", "text": "支付灰度开关 pay_new_flow", "score": 0.5, "confidence": 0.6}],
    }
    monkeypatch.setattr("memself.engine.client.recall_or_none", lambda *a, **k: result)
    set_config_value(store.paths, "showRecall", "true")
    reply = handle(event(EventKind.PROMPT_SUBMIT, host="claude", prompt="支付页灰度怎么开"), T0, store.paths)
    assert "## 规则\n- Go 错误用 %w 包装（置信度 0.55，相关度 0.41）" in reply.context
    assert "## 项目事实\n- 支付灰度开关 pay_new_flow（置信度 0.6，相关度 0.50）" in reply.context
    assert reply.user_message.startswith("# 与本轮输入相关的长期记忆")
    assert "记忆沉淀未启用" not in reply.user_message


def test_stop_while_continuing_or_without_session_answers_nothing() -> None:
    store = make_store()
    active = HookEvent("claude", EventKind.STOP, "Stop", "s1", "", "", "", True)
    assert handle(active, T0, store.paths).empty
    assert handle(event(EventKind.STOP, session=""), T0, store.paths).empty
