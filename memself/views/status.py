"""How far the store's memories have their "applies when" requests, and today's budget: for
``memself views status`` and ``doctor``. Reads only; never sends anything.

What missing requests cost is stated with the held-out figures of the model's calibration file
(``memself/data/recall``, written with the calibration; ``docs/recall.md``): the labelled case
sets recalled with and without each memory's requests. A model without such figures is told the
offline model's, named as such.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memself.config import Config
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from memself.views.batch import is_stale
from memself.views.budget import Budget, today_budget
from memself.views.fill import endpoint_configured
from memself.views.state import load_state


@dataclass(frozen=True)
class Coverage:
    active: int  # memories that can be recalled
    with_requests: int  # of them, with current requests
    waiting: int  # without requests, or with stale ones
    stale: int  # of the waiting, those whose requests describe an older text
    failed_today: int  # of the waiting, those the endpoint answered badly today (next try tomorrow)
    tries_before: int  # of the waiting, those with at least one failed attempt
    budget: Budget
    endpoint: bool


def coverage(paths: DataPaths, config: Config, now: datetime) -> Coverage:
    state = load_state(paths)
    memories = [m for m in MemoryStore(paths).all() if m.active]
    stale = [m for m in memories if is_stale(m, state)]
    bare = [m for m in memories if not m.appliesWhen]
    pending = stale + bare
    budget = today_budget(config, state, now)
    if state.unreadable:
        budget = Budget(
            budget.requests_allowed, budget.tokens_allowed, budget.requests_allowed, budget.tokens_allowed
        )
    return Coverage(
        active=len(memories),
        with_requests=len(memories) - len(pending),
        waiting=len(pending),
        stale=len(stale),
        failed_today=sum(1 for m in pending if state.failed_today(m.id, now)),
        tries_before=sum(1 for m in pending if state.tries(m.id) > 0),
        budget=budget,
        endpoint=endpoint_configured(config),
    )


def _pct(value: float) -> str:
    return f"{value:.0%}"


def _held_out(model_id: str) -> dict[str, dict[str, float]] | None:
    """The held-out figures with and without requests of ``model_id``'s calibration file, when it
    has both."""
    from memself.errors import MemselfError
    from memself.recall.calibration import load_calibration

    try:
        cal = load_calibration(model_id)
    except MemselfError:
        return None
    return cal.held_out if cal is not None and {"with", "without"} <= cal.held_out.keys() else None


def _model_id(model: str) -> str:
    from memself.errors import MemselfError
    from memself.model.catalog import resolve_model

    try:
        return resolve_model(model).model_id
    except MemselfError:
        return ""  # an unusable model name: doctor reports it elsewhere


def cost_text(model: str) -> str:
    """What recall loses without requests, in the figures measured held out (Chinese): the
    configured model's own, else the offline model's, said so."""
    from memself.model.catalog import OFFLINE_MODEL

    own = _model_id(model)
    for model_id in dict.fromkeys(m for m in (own, OFFLINE_MODEL) if m):
        figures = _held_out(model_id)
        if figures is not None:
            break
    else:
        return "缺少适用场景时召回会变弱（这个向量模型没有测量数字）"
    a, b = figures["without"], figures["with"]
    where = "" if model_id == own else f"，按内置离线模型 {model_id} 的测量"
    return (
        f"没有适用场景时召回较弱（留出测量{where}）："
        f"规则命中 {_pct(a['ruleHit'])}、误带 {_pct(a['ruleLeak'])}"
        f"（有适用场景时 {_pct(b['ruleHit'])}、{_pct(b['ruleLeak'])}），"
        f"项目事实命中 {_pct(a['projectHit'])}、误带 {_pct(a['projectLeak'])}"
        f"（有时 {_pct(b['projectHit'])}、{_pct(b['projectLeak'])}），"
        f"单条记忆命中 {_pct(a['single'])}（有时 {_pct(b['single'])}）"
    )


def render_text(cov: Coverage, model: str) -> list[str]:
    b = cov.budget
    lines = [
        f"可召回的记忆 {cov.active} 条：已有适用场景 {cov.with_requests} 条，等待补写 {cov.waiting} 条"
        + (f"（其中 {cov.stale} 条的正文改过，旧的适用场景已过时）" if cov.stale else ""),
    ]
    if cov.failed_today:
        lines.append(f"今天接口没给出可用结果的 {cov.failed_today} 条，明天再试")
    lines.append(
        f"今天的额度：请求 {b.requests_spent}/{b.requests_allowed} 次，"
        f"token {b.tokens_spent}/{b.tokens_allowed}（估算）；还可以发 {b.requests_left} 次"
    )
    if not cov.endpoint:
        lines.append("没有配置旁路判别接口：不会发送任何请求（memself setup 配置后每天在后台补写）")
    elif cov.waiting:
        lines.append("每天第一次会话开始时在后台按额度补写；也可以运行 memself views fill")
    if cov.waiting:
        lines.append(cost_text(model))
    return lines


def to_json(cov: Coverage) -> dict[str, Any]:
    b = cov.budget
    return {
        "active": cov.active,
        "withRequests": cov.with_requests,
        "waiting": cov.waiting,
        "stale": cov.stale,
        "failedToday": cov.failed_today,
        "endpoint": cov.endpoint,
        "budget": {
            "requests": b.requests_allowed,
            "tokens": b.tokens_allowed,
            "requestsSpent": b.requests_spent,
            "tokensSpent": b.tokens_spent,
            "requestsLeft": b.requests_left,
            "tokensLeft": b.tokens_left,
        },
    }
