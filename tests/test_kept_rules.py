"""Rules kept or broken: the Stop-side check against a real judge server on 127.0.0.1, the count
on the memory, the one-line notice at the session's next prompt, and every bad answer ignored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memself.hook.core import handle
from memself.hosts.base import EventKind, HookEvent
from memself.kept import counts
from memself.kept.run import check_turn, judge_call, main, read_handoff
from memself.kept.start import ANSWER_HEAD, ANSWER_TAIL, maybe_start_check
from memself.kept.turns import note_shown, notice_path, take_notice
from memself.kept.verdict import parse_verdict
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from tests.support.helpers import T0, make_store, record, write_records
from tests.support.judge_helpers import API_KEY, configure
from tests.support.judge_server import FakeJudge, running_judge, sse
from tests.support.original_reader import original_reads

ENGLISH = "Sure. Here is the fix.\nThe function now returns early when the list is empty."
RULE_ZH = "回答问题时一律使用中文"


@pytest.fixture(autouse=True)
def kept_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSELF_KEPT", "1")
    monkeypatch.setattr("memself.engine.client.ensure_started", lambda *a, **k: None)
    monkeypatch.setattr("memself.engine.client.recall_or_none", lambda *a, **k: None)


def rules_store() -> MemoryStore:
    store = make_store()
    write_records(
        store,
        "rule",
        [record("r-zh", RULE_ZH, 0.8), record("r-commit", "修改代码后不要自动 git commit", 0.7)],
    )
    return store


def verdict(*items: tuple[str, str]) -> str:
    return json.dumps({"broken": [{"id": i, "sentence": s} for i, s in items]}, ensure_ascii=False)


def stop_event(answer: str, session: str = "s1", host: str = "claude") -> HookEvent:
    return HookEvent(host, EventKind.STOP, "Stop", session, "", "", "/work", False, "", answer)


def prompt_event(prompt: str, session: str = "s1", host: str = "claude") -> HookEvent:
    return HookEvent(host, EventKind.PROMPT_SUBMIT, "UserPromptSubmit", session, "", prompt, "/work", False)


def run_check(store: MemoryStore, judge: FakeJudge, answer: str, session: str = "s1"):
    data = {"host": "claude", "sessionKey": session, "workspace": "", "shown": [], "answer": answer}
    call = judge_call(store.paths, _config(store.paths), T0, 2, answer)
    return check_turn(store, data, T0, call, None)


def _config(paths: DataPaths):
    from memself.config import load_config

    return load_config(paths)


def test_a_broken_rule_is_counted_and_named_once_at_the_next_prompt() -> None:
    store = rules_store()
    with running_judge() as judge:
        configure(store.paths, judge.url)
        judge.script(sse(verdict(("r-zh", "Sure. Here is the fix."))))
        result = run_check(store, judge, ENGLISH)
        assert len(judge.requests) == 1
        sent = judge.user_messages[0]
        assert RULE_ZH in sent and "r-zh" in sent and "returns early" in sent
    assert result.broken == ["r-zh"] and result.problem == ""
    rule = MemoryStore(store.paths).get("r-zh")
    assert rule is not None and counts.count(rule, counts.BROKEN) == 1
    assert rule.extra[counts.BROKEN_AT] and rule.confidence == 0.8  # the rewards are untouched
    # The original's strict reader still takes every line, and no answer text is on disk.
    assert len(original_reads(store.paths.group_file("rule"))) == 2
    assert "returns early" not in store.paths.group_file("rule").read_text("utf-8")
    other = handle(prompt_event("帮我看看这个函数", session="s2"), T0, store.paths)
    assert "没有遵守规则" not in other.context  # another session sees nothing
    reply = handle(prompt_event("帮我看看这个函数"), T0, store.paths)
    line = f"记忆提示：上一轮回答没有遵守规则「{RULE_ZH}」，本轮请遵守。"
    assert line in reply.context and line in reply.user_message
    again = handle(prompt_event("再看看这个"), T0, store.paths)
    assert "没有遵守规则" not in again.context  # shown once


@pytest.mark.parametrize(
    "answer",
    [
        verdict(("r-unknown", "Sure. Here is the fix.")),  # an invented id
        verdict(("r-zh", "Sure."), ("r-other-ws", "Sure.")),  # one rule not in force
        verdict(("r-zh", "Bien sûr, voici la correction.")),  # a quote the answer never had
        '{"broken": "r-zh"}',
        "I think rule r-zh was broken.",
        verdict(("r-zh", "")),
    ],
    ids=["invented", "not-in-force", "quote", "not-a-list", "prose", "empty-quote"],
)
def test_a_bad_verdict_changes_nothing_and_is_logged(answer: str) -> None:
    store = rules_store()
    before = store.paths.group_file("rule").read_bytes()
    with running_judge() as judge:
        configure(store.paths, judge.url)
        judge.script(sse(answer))
        result = run_check(store, judge, ENGLISH)
    assert result.broken == [] and result.problem
    assert store.paths.group_file("rule").read_bytes() == before
    assert not notice_path(store.paths, "claude", "s1").exists()
    assert "kept-verdict-ignored" in store.paths.log_file.read_text("utf-8")


def test_a_rule_of_another_workspace_is_not_in_force() -> None:
    store = make_store()
    other = record("r-ws", "这个仓库用 pnpm 装依赖", 0.8)
    other["workspace"] = "/elsewhere/repo"
    write_records(store, "rule", [record("r-zh", RULE_ZH, 0.8), other])
    assert parse_verdict(verdict(("r-ws", "Sure.")), ["r-zh"], ENGLISH).problem == "not-in-force"
    with running_judge() as judge:
        configure(store.paths, judge.url)
        judge.script(sse(verdict(("r-ws", "Sure. Here is the fix."))))
        result = run_check(store, judge, ENGLISH)
        assert "pnpm" not in judge.user_messages[0]
    assert result.broken == [] and result.problem == "not-in-force"


def test_a_huge_answer_with_a_secret_leaves_bounded_and_redacted(tmp_path: Path) -> None:
    store = rules_store()
    secret = "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
    answer = f"Use this key: {secret}\n" + "x" * 500_000 + "\nThe end."
    handoff = maybe_start_check(
        store.paths, stop_event(answer), T0, lambda: 2, lambda: True, spawn=lambda argv: None
    )
    assert handoff is not None and handoff.stat().st_mode & 0o777 == 0o600
    data = read_handoff(handoff)
    assert not handoff.exists()  # the check removes the answer as soon as it has read it
    assert data is not None and secret not in data["answer"]
    assert len(data["answer"]) <= ANSWER_HEAD + ANSWER_TAIL + 10 and data["answer"].endswith("The end.")
    with running_judge() as judge:
        configure(store.paths, judge.url)
        judge.script(sse('{"broken": []}'))
        call = judge_call(store.paths, _config(store.paths), T0, 2, data["answer"])
        check_turn(store, data, T0, call, None)
        raw = judge.requests[0].raw
    assert secret not in raw and API_KEY not in raw and len(raw) < 20_000


def test_a_turn_without_an_answer_starts_no_check_and_counts_nothing() -> None:
    store = rules_store()
    note_shown(store.paths, "claude", "s1", "", ["r-zh"], T0)
    started: list[list[str]] = []
    assert (
        maybe_start_check(store.paths, stop_event(""), T0, lambda: 2, lambda: True, spawn=started.append)
        is None
    )
    assert started == []
    assert "kept-no-answer" in store.paths.log_file.read_text("utf-8")


def test_no_check_without_rules_or_recalled_memories() -> None:
    store = make_store()
    started: list[list[str]] = []
    assert (
        maybe_start_check(store.paths, stop_event(ENGLISH), T0, lambda: 0, lambda: True, spawn=started.append)
        is None
    )
    assert (
        maybe_start_check(
            store.paths, stop_event(ENGLISH), T0, lambda: 2, lambda: False, spawn=started.append
        )
        is None
    )
    assert started == []


def test_the_stop_hook_hands_the_answer_to_a_detached_run_that_checks_it(monkeypatch) -> None:
    store = rules_store()
    started: list[list[str]] = []
    monkeypatch.setattr("memself.kept.start._spawn", started.append)
    with running_judge() as judge:
        configure(store.paths, judge.url, confirm=False)
        reply = handle(stop_event(ENGLISH), T0, store.paths)
        assert reply.continuation == "" and len(started) == 1
        argv = started[0]
        assert argv[1] == "-I"  # nothing from the working directory is imported
        judge.script(sse(verdict(("r-zh", "The function now returns early when the list is empty."))))
        assert main(argv[-2:]) == 0
        assert len(judge.requests) == 1  # one request for the turn's rules
    assert take_notice(store.paths, "claude", "s1") == [RULE_ZH]


def test_the_daily_budget_stops_requests(monkeypatch) -> None:
    store = rules_store()
    monkeypatch.setattr("memself.kept.ledger.DAILY_REQUESTS", 1)
    with running_judge() as judge:
        configure(store.paths, judge.url)
        judge.script(sse('{"broken": []}'), sse('{"broken": []}'))
        run_check(store, judge, ENGLISH)
        assert judge_call(store.paths, _config(store.paths), T0, 2, ENGLISH) is None
        assert len(judge.requests) == 1


def test_a_rule_broken_again_and_again_gets_advice_everywhere_and_stays(monkeypatch) -> None:
    from click.testing import CliRunner

    from memself.cli import main as cli
    from memself.doctor import check_kept
    from memself.page.html import render_html
    from tests.test_snapshot import rows

    store = rules_store()
    with running_judge() as judge:
        configure(store.paths, judge.url)
        for _ in range(counts.OFTEN_BROKEN):
            judge.script(sse(verdict(("r-zh", "Sure. Here is the fix."))))
            run_check(store, judge, ENGLISH)
    fresh = MemoryStore(store.paths)
    rule = fresh.get("r-zh")
    assert rule is not None and rule.active and counts.count(rule, counts.BROKEN) == counts.OFTEN_BROKEN
    assert len(original_reads(store.paths.group_file("rule"))) == 2
    listed = CliRunner().invoke(cli, ["list"]).output
    assert (
        f"{RULE_ZH}（置信度 0.8，所有项目，经常被违反：换个说法或写得更具体，来源：本机，id r-zh）" in listed
    )
    assert "经常被违反" not in listed.split("修改代码后不要自动 git commit", 1)[1].splitlines()[0]
    page = rows(render_html({"rule": fresh.active("rule")}, T0))
    assert page["r-zh"][10] == "经常被违反：换个说法或写得更具体" and page["r-commit"][10] == ""
    check = check_kept(store.paths)
    assert (
        check is not None and "1 条规则经常被违反" in check.summary and "（3 次，id r-zh）" in check.summary
    )


def test_below_the_line_no_advice() -> None:
    from memself.doctor import check_kept

    store = rules_store()
    store.add_counts({"r-zh": {counts.BROKEN: counts.OFTEN_BROKEN - 1}}, T0)
    assert check_kept(store.paths) is None


def test_files_nobody_took_are_pruned_by_a_later_stop() -> None:
    import os
    import time

    from memself.kept.turns import kept_dir, leave_notice

    store = rules_store()
    note_shown(store.paths, "claude", "gone", "", ["r-zh"], T0)
    leave_notice(store.paths, "claude", "gone", [("r-zh", RULE_ZH)])
    stale = kept_dir(store.paths) / "check-1-1.json"
    stale.write_text("{}", encoding="utf-8")
    old = time.time() - 2 * 86400
    for path in kept_dir(store.paths).iterdir():
        os.utime(path, (old, old))
    maybe_start_check(store.paths, stop_event(ENGLISH), T0, lambda: 2, lambda: True, spawn=lambda argv: None)
    names = sorted(p.name for p in kept_dir(store.paths).iterdir() if not p.name.startswith("."))
    assert len(names) == 1 and names[0].startswith("check-") and names[0] != stale.name
