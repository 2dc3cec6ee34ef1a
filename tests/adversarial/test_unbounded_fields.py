"""Whatever the judge answers, and whatever a writer is handed, no line is written that the
store's own reader would refuse.

The attack: a broken or hostile judge endpoint answers each judged prompt with a megabyte of
``evidence`` (and of every other field). Twelve such prompts used to write a rule.jsonl of
about 11 MB in lines near 1 MB; the reader quarantined every one of them (its line limit is
64 KiB) and the daily maintenance paused for the whole store. Now every field the judge supplies
is bounded and normalised before a job or a memory is written, and the one encoder of stored
lines trims a record by field priority, or refuses it with a Chinese error, before a line could
exceed the limit. The real judge server on 127.0.0.1 plays the endpoint; the property test
drives every writer (judge apply, CLI add, MCP merge and replace, merge, replace, delete,
restore, move, reinforce, the daily maintenance) with hostile input.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from memself.cli.app import main
from memself.config import load_config
from memself.errors import MemselfError
from memself.judge import jobs
from memself.judge.apply import apply_proposal
from memself.judge.resolve import resolve
from memself.judge.worker import run_job
from memself.maintenance import run_daily_maintenance
from memself.mcp_server import MemoryTools
from memself.paths import DataPaths
from memself.store.memory_store import MAX_LINE_BYTES, MemoryStore, parse_records
from memself.store.records import GROUPS, MAX_APPLIES_WHEN, MAX_APPLIES_WHEN_TEXT, one_line
from tests.support.judge_helpers import NOW, clock, configure, overlap_nearest, start_job, stop
from tests.support.judge_server import dedup, plain, running_judge

MAX_EVIDENCE = 200  # the original's fallback evidence: the first 200 characters of the prompt
JOB_FILE_LIMIT = 16 * 1024
# Under the judge's 1 MiB response limit with every other field: 700 KB of evidence.
EVIDENCE = 700_000


def stored_files(paths: DataPaths) -> list[Path]:
    return [paths.group_file(g) for g in GROUPS] + [paths.trash]


def assert_reader_accepts_everything(paths: DataPaths) -> None:
    for path in stored_files(paths):
        if not path.exists():
            continue
        data = path.read_bytes()
        longest = max((len(line) for line in data.split(b"\n")), default=0)
        assert longest <= MAX_LINE_BYTES, (path.name, longest)
        _, bad = parse_records(data)
        assert bad == [], (path.name, [(b.line_no, b.reason) for b in bad])
    assert MemoryStore(paths).quarantined() == []


def hostile_remember(i: int, size: int) -> str:
    """A remember answer whose every field is huge, oddly typed or full of controls; the text
    itself is usable, so a memory is written. ``size`` is the evidence's length."""
    return json.dumps(
        {
            "remember": True,
            "text": f"第 {i} 条：提交代码前先在本地跑一遍完整的单元测试",
            "group": "rule",
            "evidence": "原话\n\u202e记住\x00" + "e" * size,
            "appliesWhen": ["写个脚本"] + ["w" * 5000] * 6 + [f"请求{j}\u2028换行" for j in range(40)],
            "scope": "workspace" + " " * 50_000,
            "reason": "r" * 50_000,
            "extra": ["x" * 1000] * 50,
        },
        ensure_ascii=False,
    )


def check_memories(store: MemoryStore) -> None:
    for memory in store.all():
        assert memory.evidence == one_line(memory.evidence), repr(memory.evidence[:80])
        assert len(memory.evidence) <= MAX_EVIDENCE, len(memory.evidence)
        assert len(memory.appliesWhen) <= MAX_APPLIES_WHEN
        assert all(2 <= len(w) <= MAX_APPLIES_WHEN_TEXT for w in memory.appliesWhen)


def test_twelve_hostile_answers_leave_a_store_the_reader_and_maintenance_accept() -> None:
    paths = DataPaths.default()
    store = MemoryStore(paths)
    with running_judge() as judge:
        configure(paths, judge.url, confirm=False)
        job_sizes: list[int] = []
        requests = 0
        for i in range(12):
            replies = [plain(hostile_remember(i, EVIDENCE))]
            if store.all():
                mem_id = store.all()[0].id
                answer = (
                    dedup("merge", mem_id, "m" * 400_000, when=["w" * 9000] * 60)
                    if i % 3 == 1
                    else dedup("create")
                )
                replies.append(plain(answer))
            judge.script(*replies)
            sid = start_job(paths, f"记住：第 {i} 条，提交前先跑完整单元测试", turn=f"t{i}")
            done = run_job(
                jobs.job_path(paths, sid), clock(NOW), overlap_nearest(store), store, load_config(paths)
            )
            assert done is not None and done["status"] == jobs.READY and done.get("applied"), done
            job_sizes.append(jobs.job_path(paths, sid).stat().st_size)
            requests += len(judge.requests)
    assert_reader_accepts_everything(paths)
    assert requests == 23  # one remember call each, a dedup call from the second on
    assert max(job_sizes) < JOB_FILE_LIMIT, job_sizes
    assert len(store.all()) >= 8
    check_memories(store)
    total = sum(p.stat().st_size for p in stored_files(paths) if p.exists())
    assert total < 12 * 4096, total
    # The daily maintenance runs over the whole store instead of pausing at a quarantined line.
    assert run_daily_maintenance(paths, 30, NOW + timedelta(days=1)) is not None
    assert_reader_accepts_everything(paths)


def test_a_hostile_proposal_waiting_for_the_popup_is_bounded_in_its_job() -> None:
    paths = DataPaths.default()
    store = MemoryStore(paths)
    with running_judge() as judge:
        configure(paths, judge.url, confirm=True)
        judge.script(plain(hostile_remember(0, EVIDENCE)))
        sid = start_job(paths, "记住：提交前先跑完整单元测试")
        done = run_job(
            jobs.job_path(paths, sid), clock(NOW), overlap_nearest(store), store, load_config(paths)
        )
    assert done is not None and done["status"] == jobs.READY and not done.get("applied")
    assert jobs.job_path(paths, sid).stat().st_size < JOB_FILE_LIMIT
    proposal = done["proposal"]
    assert len(proposal["evidence"]) <= MAX_EVIDENCE and "\n" not in proposal["evidence"]
    assert "\u202e" not in proposal["evidence"] and "\x00" not in proposal["evidence"]
    assert set(proposal) <= {
        "text",
        "evidence",
        "category",
        "action",
        "targetId",
        "targetText",
        "targetCategory",
        "mergedText",
        "score",
        "appliesWhen",
        "mergedAppliesWhen",
        "scope",
    }, set(proposal)
    popup = stop(paths, store)  # the Stop that shows the popup; then the user's answer
    assert popup is not None and "\u202e" not in json.dumps(popup, ensure_ascii=False)
    resolve(paths, store, "claude", sid, "create_rule", NOW)
    assert len(store.all()) == 1
    assert_reader_accepts_everything(paths)
    check_memories(store)


# --- every writer, hostile input: the property ----------------------------------------------


def hostile_text(rng: random.Random, longest: int) -> str:
    pieces = ["提交前先跑测试", "\n", "\u2028", "\x00", "\u202e", "\ud800", '"', "\\", "证据", "x", "😀", " "]
    size = rng.choice([0, 1, 5, 50, 300, 401, 5000, longest])
    out: list[str] = []
    while sum(len(p) for p in out) < size:
        piece = rng.choice(pieces)
        out.append(piece * rng.randint(1, max(1, size // 20)))
    return "".join(out)[:size]


def hand_record(mem_id: str, line_bytes: int, field: str) -> bytes:
    """A record the reader accepts (``line_bytes`` long, at most the limit) whose bulk is in
    ``field``: written by hand, or by the original plugin."""
    seen = "2026-11-29T08:00:00.000Z"
    record: dict[str, Any] = {
        "id": mem_id,
        "text": f"手写的记忆 {mem_id}，内容足够长",
        "confidence": 0.8,
        "category": "rule",
        "evidence": "",
        "firstSeen": seen,
        "lastSeen": seen,
        "deprecated": False,
        "createdAt": seen,
    }
    base = len(json.dumps({**record, field: ""}, ensure_ascii=False, separators=(",", ":")).encode())
    record[field] = "证" * ((line_bytes - base) // 3) + "x" * ((line_bytes - base) % 3)
    line = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode()
    assert len(line) == line_bytes <= MAX_LINE_BYTES
    return line + b"\n"


def argv_safe(text: str) -> str:
    """What a command line can carry: no NUL, no lone surrogate."""
    return text.replace("\x00", "").replace("\ud800", "")


def snapshot(paths: DataPaths) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in stored_files(paths) if p.exists()}


@pytest.mark.parametrize("seed", range(6))
def test_no_writer_produces_a_line_the_reader_refuses(seed: int, tmp_path: Path) -> None:
    rng = random.Random(seed)
    paths = DataPaths.default()
    paths.ensure()
    store = MemoryStore(paths)
    tools = MemoryTools(paths, "claude", now_fn=clock(NOW))
    workspace_dir = tmp_path / ("w" * 200) / ("v" * 200)
    workspace_dir.mkdir(parents=True)
    # Records at the reader's limit, their bulk in a field a writer may trim, and in one it may not.
    with open(paths.group_file("rule"), "ab") as handle:
        handle.write(hand_record("mem-hand-evidence", MAX_LINE_BYTES, "evidence"))
        handle.write(hand_record("mem-hand-foreign", MAX_LINE_BYTES - 10, "notes"))
        handle.write(hand_record("mem-hand-small", 2000, "evidence"))
    assert_reader_accepts_everything(paths)

    def ids() -> list[str]:
        return [m.id for m in store.all()] or ["mem-none"]

    def trashed() -> list[str]:
        return [e.memory.id for e in store.trash_entries()] or ["mem-none"]

    def any_text() -> str:
        return hostile_text(rng, 300_000)

    def cli_add() -> None:
        args = ["rule", "add", argv_safe(any_text())]
        for _ in range(rng.randint(0, 5)):
            args += ["--when", argv_safe(hostile_text(rng, 200))]
        CliRunner().invoke(main, args, catch_exceptions=False)

    def judge_apply() -> None:
        action = rng.choice(["create", "reinforce", "merge", "replace"])
        proposal = {
            "text": any_text(),
            "evidence": any_text(),
            "category": "rule",
            "action": action,
            "targetId": rng.choice(ids()),
            "mergedText": any_text(),
            "appliesWhen": [hostile_text(rng, 3000) for _ in range(rng.randint(0, 30))],
            "mergedAppliesWhen": [hostile_text(rng, 3000) for _ in range(rng.randint(0, 30))],
            "scope": any_text(),
        }
        apply_proposal(store, proposal, action, "rule", NOW)

    operations: list[Callable[[], object]] = [
        lambda: store.create(any_text(), "rule", NOW, any_text(), [any_text() for _ in range(3)]),
        lambda: store.add(any_text(), "project", NOW, any_text(), [any_text() for _ in range(3)]),
        cli_add,
        judge_apply,
        lambda: tools.call(
            "memory_update",
            {"action": "merge", "id": rng.choice(ids()), "id2": rng.choice(ids()), "text": any_text()},
        ),
        lambda: tools.call(
            "memory_update", {"action": "replace", "id": rng.choice(ids()), "text": any_text()}
        ),
        lambda: store.merge_into(rng.choice(ids()), any_text(), NOW, [any_text()]),
        lambda: store.reinforce(rng.choice(ids()), NOW, [hostile_text(rng, 100)]),
        lambda: store.delete([rng.choice(ids())], NOW, reason=any_text()),
        lambda: store.restore(rng.choice(trashed()), NOW),
        lambda: tools.call(
            "memory_update",
            {
                "action": "move",
                "id": rng.choice(ids()),
                "scope": "workspace",
                "workspace": str(workspace_dir),
            },
        ),
        lambda: run_daily_maintenance(paths, 30, NOW + timedelta(days=rng.randint(1, 400))),
    ]
    for _ in range(40):
        # The records at the limit are the interesting targets: move them to the trash and back.
        for forced in ("mem-hand-evidence", "mem-hand-foreign"):
            if rng.random() < 0.3:
                before = snapshot(paths)
                try:
                    if forced in ids():
                        store.delete([forced], NOW)
                    else:
                        store.restore(forced, NOW)
                except MemselfError:
                    assert snapshot(paths) == before
                assert_reader_accepts_everything(paths)
        before = snapshot(paths)
        operation = rng.choice(operations)
        try:
            operation()
        except MemselfError as exc:
            assert str(exc), "a refusal says why"
            assert snapshot(paths) == before, "a refused write changes nothing"
        assert_reader_accepts_everything(paths)


def test_a_record_over_the_limit_is_trimmed_by_field_priority_or_refused() -> None:
    paths = DataPaths.default()
    paths.ensure()
    store = MemoryStore(paths)
    with open(paths.group_file("rule"), "ab") as handle:
        handle.write(hand_record("mem-hand-evidence", MAX_LINE_BYTES, "evidence"))
        handle.write(hand_record("mem-hand-foreign", MAX_LINE_BYTES - 10, "notes"))
    # To the trash, the record gains its deletion fields: the evidence is cut to make room.
    store.delete(["mem-hand-evidence"], NOW)
    [entry] = store.trash_entries()
    assert entry.memory.evidence.endswith("…") and entry.reason == "user-delete"
    assert entry.memory.text == "手写的记忆 mem-hand-evidence，内容足够长"
    store.restore("mem-hand-evidence", NOW)
    assert_reader_accepts_everything(paths)
    # The bulk in a field a hand edit added is not ours to cut: refused, nothing written.
    before = snapshot(paths)
    with pytest.raises(MemselfError) as refused:
        store.delete(["mem-hand-foreign"], NOW)
    assert "超过单行上限 64 KiB" in str(refused.value) and "没有写入任何文件" in str(refused.value)
    assert snapshot(paths) == before
    assert store.get("mem-hand-foreign") is not None


def test_a_lone_surrogate_a_hand_edit_escaped_is_written_back_escaped() -> None:
    # Python's UTF-8 codec refuses it: the line is written with ASCII escapes, as it was found.
    paths = DataPaths.default()
    paths.ensure()
    record = json.loads(hand_record("mem-hand-surrogate", 400, "evidence"))
    record["evidence"] = "\ud800 一个落单的代理项"
    paths.group_file("rule").write_text(json.dumps(record) + "\n", encoding="utf-8")
    store = MemoryStore(paths)
    store.reinforce("mem-hand-surrogate", NOW)
    assert_reader_accepts_everything(paths)
    assert store.get("mem-hand-surrogate").evidence == "\ud800 一个落单的代理项"
