"""The newest memory first: a real engine (the offline model) starting on a long backlog of
memories without vectors recalls the one added last on the very first prompt, from the hook and
from ``memself recall``, long before the backlog is done."""

from __future__ import annotations

from click.testing import CliRunner

from memself.cli.app import main
from memself.index.sync import VectorIndex, view_row_id
from memself.paths import DataPaths
from memself.store.records import Memory
from tests.support.backlog_helpers import (
    backlog_of,
    engine_home,
    filler,
    prompt_hook,
    start_engine,
    write_unencoded_store,
)

__all__ = ["engine_home"]  # a fixture: pytest finds it here

# Longer than every filler fact: encoding the shortest texts first would reach it last.
LONG_FACT = (
    "支付页新流程的灰度开关是 pay_new_flow，放在配置中心支付分组下，上线前先在预发环境打开，"
    "观察半小时订单成功率没有下降再全量，回滚时直接关掉这个开关即可"
)


def _first_prompt_recalls_the_newest(paths: DataPaths, count: int) -> None:
    write_unencoded_store(paths, count, fact=LONG_FACT)
    assert all(len(text) < len(LONG_FACT) for text in filler(count - 1))
    ready = start_engine(paths)
    assert ready["service"]["memories"] == count
    assert backlog_of(ready) is not None and ready["service"]["indexed"] < count
    assert "pay_new_flow" in prompt_hook()
    shown = CliRunner().invoke(main, ["recall", "支付页新流程的灰度开关叫什么"])
    assert shown.exit_code == 0 and "pay_new_flow" in shown.output
    assert backlog_of(start_engine(paths)) is not None  # all of it while the backlog still ran


def test_the_memory_added_last_is_recalled_on_the_first_prompt_behind_1000_unencoded(
    engine_home: DataPaths,
) -> None:
    """The engine never waits for the backlog here, so 1,000 cost only their reading."""
    _first_prompt_recalls_the_newest(engine_home, 1001)


class _Encoder:
    model_id, dim, views = "fake", 4, True


def _memory(mem_id: str, created: str, changed: str = "", requests: tuple[str, ...] = ()) -> Memory:
    return Memory(
        id=mem_id,
        text=f"记忆 {mem_id} 的正文",
        confidence=0.7,
        category="project",
        createdAt=created,
        textChangedAt=changed,
        appliesWhen=requests,
    )


def test_the_plan_lists_the_newest_text_first(tmp_path) -> None:
    """By the time the text was written (an edit's time, else the creation's); a memory's views
    follow it; without a time, the store's order reversed, after every dated one."""
    memories = [
        _memory("undated-a", ""),
        _memory("old", "2026-01-01T08:00:00.000Z"),
        _memory("edited", "2025-06-01T08:00:00.000Z", changed="2026-03-01T08:00:00+08:00"),
        _memory("newest", "2026-02-01T09:00:00.000Z", requests=("怎么发布",)),
        _memory("undated-b", "not a time"),
    ]
    plan = VectorIndex(tmp_path / "index").plan(memories, _Encoder())  # type: ignore[arg-type]
    order = [row for row, _, _ in plan.todo]
    assert order == ["edited", "newest", view_row_id("newest", 0), "old", "undated-b", "undated-a"]
