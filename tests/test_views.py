"""The "applies when" filler: the budget, the CLI, stale requests, workspaces, the daily
maintenance's background run and doctor; against a real judge server on 127.0.0.1."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner

from memself.cli import main
from memself.config import load_config, set_config_value
from memself.doctor import check_views
from memself.maintenance import run_daily_maintenance
from memself.model.catalog import OFFLINE_MODEL
from memself.paths import DataPaths
from memself.recall.calibration import load_calibration
from memself.store.memory_store import MemoryStore
from memself.views.batch import is_stale
from memself.views.fill import run_fill
from memself.views.state import load_state
from tests.support.judge_helpers import NOW, configure
from tests.support.judge_server import FakeJudge, running_judge
from tests.support.views_helpers import WritingJudge, original_store, sent_memories


@pytest.fixture
def judge() -> Iterator[FakeJudge]:
    with running_judge() as server:
        server.responder = WritingJudge()
        yield server


def _store(n: int, workspace: str = "") -> tuple[DataPaths, MemoryStore]:
    return original_store(n, "views", workspace)


# The CLI reads the real clock: the budget's day must be the same.
TODAY = datetime.now(timezone.utc)


def _fill(paths: DataPaths, when=TODAY, **kw):
    return run_fill(paths, load_config(paths), lambda: when, timeout=10, **kw)


def test_the_daily_budget_stops_the_run_and_the_next_day_goes_on(judge: FakeJudge) -> None:
    paths, store = _store(40)
    configure(paths, judge.url)
    set_config_value(paths, "viewsDailyRequests", "3")
    report = _fill(paths)
    assert report.stopped == "budget" and report.requests == 3 and len(judge.requests) == 3
    assert len(report.filled) == 24 and sum(bool(m.appliesWhen) for m in store.all()) == 24
    result = CliRunner().invoke(main, ["views", "status", "--json"])
    status = json.loads(result.output)
    assert status["waiting"] == 16 and status["budget"]["requestsSpent"] == 3
    assert status["budget"]["requestsLeft"] == 0
    assert _fill(paths).requests == 0 and len(judge.requests) == 3  # nothing more today
    report = _fill(paths, TODAY + timedelta(days=1))
    assert report.stopped == "done" and report.requests == 2
    assert all(m.appliesWhen for m in store.all())


def test_a_token_budget_too_small_for_one_batch_sends_nothing(judge: FakeJudge) -> None:
    paths, _ = _store(5)
    configure(paths, judge.url)
    set_config_value(paths, "viewsDailyTokens", "300")
    report = _fill(paths)
    assert report.stopped == "budget" and report.requests == 0 and judge.requests == []


def test_limit_and_the_dry_run(judge: FakeJudge) -> None:
    paths, store = _store(20)
    configure(paths, judge.url)
    result = CliRunner().invoke(main, ["views", "fill", "--dry-run", "--limit", "10"])
    assert result.exit_code == 0 and judge.requests == []
    assert result.output.count("--- 第") == 2 and "什么也没有发送" in result.output
    assert not any(m.appliesWhen for m in store.all()) and not (paths.root / "views" / "state.json").exists()
    result = CliRunner().invoke(main, ["views", "fill", "--limit", "10"])
    assert result.exit_code == 0, result.output
    assert "发送了 2 个请求，10 条记忆补上了适用场景" in result.output
    assert sum(len(sent_memories(r.body)) for r in judge.requests) == 10


def test_without_an_endpoint_nothing_is_sent_and_doctor_says_what_it_costs(judge: FakeJudge) -> None:
    paths, store = _store(3)
    result = CliRunner().invoke(main, ["views", "fill"])
    assert result.exit_code == 1 and "没有配置旁路判别接口，什么也没有发送" in result.output
    assert judge.requests == [] and not any(m.appliesWhen for m in store.all())
    dry = CliRunner().invoke(main, ["views", "fill", "--dry-run"])
    assert "没有配置旁路判别接口" in dry.output and "svc1" in dry.output
    check = check_views(paths)
    assert check is not None and check.ok is None
    assert "3/3 条可召回的记忆还没有适用场景" in check.summary
    # The figures are the offline model's, measured held out and written with its calibration
    # (the configured default model has none of its own), and said to be so.
    held = load_calibration(OFFLINE_MODEL).held_out  # type: ignore[union-attr]
    without, with_ = held["without"], held["with"]
    assert f"规则命中 {without['ruleHit']:.0%}、误带 {without['ruleLeak']:.0%}" in check.summary
    assert f"（有适用场景时 {with_['ruleHit']:.0%}、{with_['ruleLeak']:.0%}）" in check.summary
    assert f"单条记忆命中 {without['single']:.0%}（有时 {with_['single']:.0%}）" in check.summary
    assert f"按内置离线模型 {OFFLINE_MODEL} 的测量" in check.summary
    status = CliRunner().invoke(main, ["views", "status"]).output
    assert "等待补写 3 条" in status and "不会发送任何请求" in status


def test_a_key_entered_for_another_endpoint_sends_nothing(judge: FakeJudge) -> None:
    paths, _ = _store(3)
    configure(paths, judge.url)
    set_config_value(paths, "sideApiBase", judge.url.replace("127.0.0.1", "localhost"))
    result = CliRunner().invoke(main, ["views", "fill"])
    assert result.exit_code == 1 and "没有发送任何请求" in result.output and judge.requests == []


def test_a_changed_text_gets_new_requests(judge: FakeJudge) -> None:
    paths, store = _store(3)
    configure(paths, judge.url)
    assert len(_fill(paths).filled) == 3
    first, second, _ = store.all()
    # Through memself: the old requests go with the old text.
    store.replace(first.id, "服务 svc0 的日志改到 /data/logs/svc0 了", NOW)
    assert store.get(first.id).appliesWhen == ()
    # Behind memself's back (a hand edit, the original plugin): the requests are stale.
    path = paths.group_file("project")
    path.write_text(path.read_text("utf-8").replace("/var/log/svc1", "/srv/log/svc1"), "utf-8")
    edited = store.get(second.id)
    assert edited.appliesWhen and is_stale(edited, load_state(paths))
    status = json.loads(CliRunner().invoke(main, ["views", "status", "--json"]).output)
    assert status["waiting"] == 2 and status["stale"] == 1
    report = _fill(paths)
    assert sorted(report.filled) == sorted([first.id, second.id])
    asked = {m["id"]: m["text"] for m in sent_memories(judge.requests[-1].body)}
    assert asked == {first.id: store.get(first.id).text, second.id: store.get(second.id).text}
    assert not is_stale(store.get(second.id), load_state(paths)) and store.get(second.id).appliesWhen


def test_batches_keep_to_one_workspace_and_the_workspace_stays(judge: FakeJudge, tmp_path: Path) -> None:
    repo = tmp_path / "pay-service"
    (repo / ".git").mkdir(parents=True)
    paths, store = _store(6, workspace=str(repo))
    configure(paths, judge.url)
    before = {m.id: m.workspace for m in store.all()}
    assert _fill(paths).requests == 2
    by_id = {m.id: m for m in store.all()}
    for request in judge.requests:
        assert len({before[m["id"]] for m in sent_memories(request.body)}) == 1
        assert str(repo) not in request.raw  # where a memory lives is not sent
    assert {i: m.workspace for i, m in by_id.items()} == before and all(m.appliesWhen for m in by_id.values())


def test_the_daily_maintenance_starts_the_background_run(
    judge: FakeJudge, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("MEMSELF_VIEWS_DELAY_S", "0")
    monkeypatch.setenv("MEMSELF_VIEWS_BACKGROUND", "1")
    # The session starts in a repository that ships a package of the same name: never imported.
    planted = tmp_path / "repo" / "memself"
    planted.mkdir(parents=True)
    (planted / "__init__.py").write_text(f"open({str(tmp_path / 'hijacked')!r}, 'w')\n", "utf-8")
    monkeypatch.chdir(planted.parent)
    monkeypatch.setenv("PYTHONPATH", str(planted.parent))
    paths, store = _store(4)
    run_daily_maintenance(paths, 30, NOW)  # no endpoint: nothing starts
    time.sleep(0.5)
    assert judge.requests == [] and not (paths.root / "views").exists()
    configure(paths, judge.url)
    paths.decay_state.unlink()
    run_daily_maintenance(paths, 30, NOW + timedelta(days=1))
    deadline = time.monotonic() + 60
    # The run logs its end after its last write: wait for that line, not only for the memories.
    while time.monotonic() < deadline and "views-fill-done" not in paths.log_file.read_text("utf-8"):
        time.sleep(0.2)
    assert "views-fill-done" in paths.log_file.read_text("utf-8")
    assert all(m.appliesWhen for m in store.all()) and len(judge.requests) == 1
    assert not (tmp_path / "hijacked").exists()


def test_the_background_switch_keeps_the_run_from_starting(
    judge: FakeJudge, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memself.views.background import start_background_fill

    paths, _ = _store(2)
    configure(paths, judge.url)
    assert start_background_fill(paths) is None  # the suite's switch, set for every test
    set_config_value(paths, "viewsDailyRequests", "0")
    monkeypatch.setenv("MEMSELF_VIEWS_BACKGROUND", "1")
    assert start_background_fill(paths) is None  # a zero budget starts nothing either
