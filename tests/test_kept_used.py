"""Facts used or not: the local decision on the labelled pairs with the real offline model, and the
shown/used counts a checked turn leaves on the memories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memself.kept import counts
from memself.kept.run import check_turn
from memself.kept.similarity import best_cosines
from memself.kept.used import identifiers, sentences, used_facts
from memself.store.memory_store import MemoryStore
from tests.support.helpers import T0, make_store, record, write_records
from tests.support.original_reader import original_reads

PAIRS = Path(__file__).resolve().parents[1] / "eval" / "kept"


@pytest.fixture(scope="module")
def similarity(e5_encoder):  # -> SimilarityFn, as the engine answers it
    from memself.model.catalog import OFFLINE_MODEL
    from memself.recall.scoring import load_recaller

    space = load_recaller(e5_encoder, OFFLINE_MODEL).space
    return lambda facts, parts: best_cosines(e5_encoder, facts, parts, space)


def test_identifiers_are_code_like_names_only() -> None:
    fact = "支付页的灰度开关是配置中心 payment 命名空间下的 pay_new_flow，文档在 docs/pay.md"
    assert identifiers(fact) == {"pay_new_flow", "docs/pay.md"}
    assert identifiers("缓存用 Redis 集群，默认过期 3600 秒") == {"3600"}
    assert sentences("第一句。第二句！\nThird one. Fourth?") == [
        "第一句。",
        "第二句！",
        "Third one.",
        "Fourth?",
    ]


def test_the_held_out_pairs_keep_their_figures(similarity) -> None:
    pairs = json.loads((PAIRS / "used_heldout.json").read_text("utf-8"))
    assert len(pairs) >= 40
    said = [used_facts([p["fact"]], p["answer"], similarity)[0] for p in pairs]
    tp = sum(1 for p, s in zip(pairs, said, strict=True) if p["used"] and s)
    fp = sum(1 for p, s in zip(pairs, said, strict=True) if not p["used"] and s)
    fn = sum(1 for p, s in zip(pairs, said, strict=True) if p["used"] and not s)
    assert tp / (tp + fp) >= 0.95 and tp / (tp + fn) >= 0.7, (tp, fp, fn)


def test_a_checked_turn_counts_shown_and_used_and_keeps_no_answer(similarity) -> None:
    store = make_store()
    write_records(
        store,
        "project",
        [
            record(
                "p-flag", "支付页新流程的灰度开关是配置中心 payment 命名空间下的 pay_new_flow", 0.6, "project"
            ),
            record(
                "p-db", "订单服务的数据库是 PostgreSQL 14，连接串放在环境变量 ORDER_DB_URL 里", 0.6, "project"
            ),
        ],
    )
    answer = "到配置中心的 payment 命名空间，把 pay_new_flow 改成 false，新流程就关掉了。"
    data = {
        "host": "claude",
        "sessionKey": "s1",
        "workspace": "",
        "shown": ["p-flag", "p-db"],
        "answer": answer,
    }
    result = check_turn(store, data, T0, None, similarity)
    assert result.shown_facts == ["p-flag", "p-db"] and result.used_facts == ["p-flag"]
    fresh = MemoryStore(store.paths)
    flag, db = fresh.get("p-flag"), fresh.get("p-db")
    assert flag is not None and db is not None
    assert (counts.count(flag, counts.SHOWN), counts.count(flag, counts.USED)) == (1, 1)
    assert (counts.count(db, counts.SHOWN), counts.count(db, counts.USED)) == (1, 0)
    assert flag.confidence == 0.6 and db.confidence == 0.6  # the original's rewards stay as they are
    assert len(original_reads(store.paths.group_file("project"))) == 2
    assert "新流程就关掉了" not in store.paths.group_file("project").read_text("utf-8")


def test_an_interrupted_turn_counts_nothing(similarity) -> None:
    store = make_store()
    write_records(store, "project", [record("p-x", "图片处理服务的代码在 services/imgproc", 0.6, "project")])
    before = store.paths.group_file("project").read_bytes()
    data = {"host": "claude", "sessionKey": "s1", "workspace": "", "shown": ["p-x"], "answer": ""}
    assert check_turn(store, data, T0, None, similarity).shown_facts == []
    assert store.paths.group_file("project").read_bytes() == before


def test_a_delivered_prompt_notes_what_it_was_shown_for_stop(tmp_path: Path) -> None:
    import io

    from memself.hook.inputs import Stdin
    from memself.hook.run import RunContext, run
    from memself.hosts.base import HookReply
    from memself.kept.turns import take_shown
    from memself.paths import DataPaths

    paths = DataPaths.default()
    paths.ensure()
    payload = {
        "hook_event_name": "UserPromptSubmit",
        "session_id": "s9",
        "prompt": "关掉新支付流程",
        "cwd": "/tmp",
    }
    out = io.BytesIO()
    context = RunContext(
        "claude",
        core=lambda e, n, p: HookReply(context="召回块", rewards=("p-flag",)),
        env={},
        paths=paths,
        now=T0,
        stdout=out,
    )
    assert run(Stdin(json.dumps(payload).encode()), context)
    assert out.getvalue()  # the answer was written before anything was noted
    assert take_shown(paths, "claude", "s9") == ["p-flag"]
    assert take_shown(paths, "claude", "s9") == []  # once


def test_a_prompt_through_the_real_engine_then_its_stop_counts_the_fact_used(
    e5_engine_home, monkeypatch
) -> None:
    import time

    monkeypatch.setenv("MEMSELF_KEPT", "1")
    from memself.hosts.base import EventKind, HookEvent
    from memself.kept.run import engine_similarity, main
    from memself.kept.start import maybe_start_check
    from memself.kept.turns import shown_path
    from tests.test_engine_recall import NOW, _hook

    store = MemoryStore(e5_engine_home)
    fact = store.create(
        "支付页新流程的灰度开关是 pay_new_flow，在配置中心 payment 命名空间下", "project", NOW
    )
    other = store.create("订单服务的数据库是 PostgreSQL 14", "project", NOW)
    best = engine_similarity(e5_engine_home)(
        [fact.text, other.text], ["新支付流程的灰度开关在配置中心，关掉它就行。"]
    )
    assert best[0] >= 0.48 > best[1]
    payload = {
        "hook_event_name": "UserPromptSubmit",
        "session_id": "s-e",
        "prompt": "支付页新流程的灰度开关叫什么",
    }
    answer = _hook({**payload, "cwd": "/tmp"})
    assert answer is not None and "pay_new_flow" in json.dumps(answer, ensure_ascii=False)
    deadline = time.monotonic() + 20
    while not shown_path(e5_engine_home, "claude", "s-e").exists() and time.monotonic() < deadline:
        time.sleep(0.05)  # noted once the hook process told the engine the host got the answer
    started: list[list[str]] = []
    stop = HookEvent(
        "claude", EventKind.STOP, "Stop", "s-e", "", "", "/tmp", False, "", "把 pay_new_flow 关掉即可。"
    )
    assert (
        maybe_start_check(e5_engine_home, stop, NOW, lambda: 0, lambda: False, spawn=started.append)
        is not None
    )
    assert main(started[0][-2:]) == 0
    used = MemoryStore(e5_engine_home).get(fact.id)
    assert used is not None and (counts.count(used, counts.SHOWN), counts.count(used, counts.USED)) == (1, 1)
