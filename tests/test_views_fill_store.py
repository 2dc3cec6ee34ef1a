"""A store of 200 memories brought over from the original plugin, none with "applies when"
requests, gets them for every memory from a real HTTP judge on 127.0.0.1, within the configured
budget, across a SIGKILL of the filling process while a request is in flight; nothing is lost,
no planted secret leaves the machine (the dry run and the server's log show it), and (full run)
``memself verify`` on that store shows the gain."""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from memself.config import set_config_value
from memself.paths import DataPaths
from memself.text.redact import REDACTED
from memself.views.state import load_state
from tests.support.judge_helpers import API_KEY, configure
from tests.support.judge_server import FakeJudge, running_judge
from tests.support.original_reader import ORIGINAL_FIELDS, original_reads
from tests.support.views_helpers import (
    WritingJudge,
    cli,
    copy_into,
    eval_memories,
    original_data_dir,
    records,
    run_cli,
    sent_memories,
)

SECRETS = (
    "Hunter2Secret99",
    "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "sk-proj-abcdefghijklmnopqrstuvwxyz012345",
    "S3cretPw",
    "AKIAIOSFODNN7EXAMPLE",
)
PLANTS = (
    "，测试库的密码是 Hunter2Secret99",
    "，CI 用的 token 是 ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "，key: sk-proj-abcdefghijklmnopqrstuvwxyz012345",
    "，库在 postgres://admin:S3cretPw@db.internal:5432/app",
    "，AWS 密钥 AKIAIOSFODNN7EXAMPLE",
)
DAILY_REQUESTS, DAILY_TOKENS = 30, 90000


@pytest.fixture
def judge() -> Iterator[FakeJudge]:
    with running_judge() as server:
        yield server


def _store(tmp_path: Path, judge: FakeJudge) -> tuple[DataPaths, dict[str, list[str]], list[dict]]:
    memories, table, sets = eval_memories(50)
    assert len(memories) == 200
    planted = []
    for n, (mem_id, group, text) in enumerate(memories):
        if n % 40 == 7:  # five memories, spread over the store, carry a secret
            plant = PLANTS[len(planted)]
            planted.append(mem_id)
            memories[n] = (mem_id, group, text.rstrip("。") + plant)
    source = original_data_dir(tmp_path / "original-home", memories)
    paths = copy_into(source, DataPaths.default())
    configure(paths, judge.url)
    set_config_value(paths, "viewsDailyRequests", str(DAILY_REQUESTS))
    set_config_value(paths, "viewsDailyTokens", str(DAILY_TOKENS))
    return paths, table, sets


def _dry_run_messages(output: str) -> list[str]:
    bodies = re.split(r"^--- 第 \d+ 个请求 ---$", output, flags=re.MULTILINE)[1:]
    out = []
    for chunk in bodies:
        text = chunk[: chunk.rindex("}") + 1]
        body = json.loads(text)
        out.append(body["messages"][1]["content"])
    return out


def fill_with_a_kill(tmp_path: Path, judge: FakeJudge) -> tuple[DataPaths, dict[str, dict], list[dict]]:
    """The store filled through the CLI, killed once mid-request; its records before the fill."""
    paths, table, sets = _store(tmp_path, judge)
    before = records(paths)

    code, dry, _ = run_cli(paths, "views", "fill", "--dry-run")
    assert code == 0 and judge.requests == []  # the dry run sends nothing
    assert not any(s in dry for s in SECRETS) and REDACTED in dry
    planned = _dry_run_messages(dry)
    assert len(planned) == 25  # 200 memories, eight per request

    writer = WritingJudge(table, hold_at=3)
    judge.responder = writer
    proc = cli(paths, "views", "fill")
    assert writer.arrived.wait(60), proc.communicate(timeout=5)
    proc.send_signal(signal.SIGKILL)  # the third request is in flight
    proc.wait(10)
    writer.release.set()
    killed = {m["id"] for m in sent_memories(judge.requests[2].body)}
    assert set(load_state(paths).inflight) == killed  # noted on disk before it was sent
    after_kill = records(paths)
    assert set(after_kill) == set(before)
    assert sum("appliesWhen" in r for r in after_kill.values()) == 16  # two batches written
    assert not any("appliesWhen" in after_kill[i] for i in killed)

    code, out, err = run_cli(paths, "views", "fill")
    assert code == 0, err
    assert "发送了 23 个请求，184 条记忆补上了适用场景" in out

    # What left the machine: exactly the dry run's requests, the killed one asked twice.
    sent = [next(m["content"] for m in r.body["messages"] if m["role"] == "user") for r in judge.requests]
    assert len(sent) == 26 and sorted(set(sent)) == sorted(planned)
    assert sent.count(judge.requests[2].body["messages"][1]["content"]) == 2
    for request in judge.requests:
        assert not any(s in request.raw for s in SECRETS)
        assert API_KEY not in request.raw and request.headers["Authorization"] == f"Bearer {API_KEY}"
    return paths, before, sets


def test_two_hundred_original_memories_get_requests_across_a_kill(tmp_path: Path, judge: FakeJudge) -> None:
    paths, original, _ = fill_with_a_kill(tmp_path, judge)

    final = records(paths)
    assert set(final) == set(original)  # nothing lost, nothing added
    for mem_id, raw in final.items():
        assert 1 <= len(raw["appliesWhen"]) <= 4, mem_id
        assert not any(s in line for s in SECRETS for line in raw["appliesWhen"])
        for key in (*ORIGINAL_FIELDS, "evidence"):
            assert raw[key] == original[mem_id][key], (mem_id, key)
    for group in ("rule", "project"):
        assert len(original_reads(paths.group_file(group))) == sum(
            1 for r in final.values() if r["category"] == group
        )

    code, out, _ = run_cli(paths, "views", "status", "--json")
    assert code == 0
    status = json.loads(out)
    assert status["withRequests"] == 200 and status["waiting"] == 0
    budget = status["budget"]
    assert budget["requestsSpent"] == 26 <= budget["requests"] == DAILY_REQUESTS
    assert 0 < budget["tokensSpent"] <= DAILY_TOKENS
    _, text, _ = run_cli(paths, "views", "status")
    assert "已有适用场景 200 条，等待补写 0 条" in text and "请求 26/30 次" in text


def _original_cases(sets: list[dict], texts: dict[str, str], relevant: int, irrelevant: int) -> dict:
    """Original-format cases over the store's memories: a prompt and the text it expects."""
    rel, irr = [], []
    for data in sets:
        keys = {m["key"]: texts[m["text"]] for m in data["memories"] if m["text"] in texts}
        rel += [[c["prompt"], keys[c["expect"][0]]] for c in data["relevant"] if c["expect"][0] in keys][
            : relevant // len(sets)
        ]
        irr += [c["prompt"] for c in data["irrelevant"]][: irrelevant // len(sets)]
    return {"relevant": rel, "irrelevant": irr}


@pytest.mark.full
def test_verify_on_the_filled_store_shows_the_gain(
    tmp_path: Path, judge: FakeJudge, model_cache: Path
) -> None:
    paths, _, sets = _store(tmp_path / "plain", judge)
    set_config_value(paths, "model", "multilingual-e5-small")
    # Each case expects a memory's text as the original's fragment (planted ones keep their start).
    texts = {m[2]: m[2].rstrip("。") for m in eval_memories(50)[0]}
    cases = tmp_path / "cases.json"
    cases.write_text(json.dumps(_original_cases(sets, texts, 120, 60), ensure_ascii=False), "utf-8")

    def verify() -> dict:
        _, out, err = run_cli(paths, "verify", "--cases", str(cases), "--json")
        assert out, err
        return json.loads(out)

    without = verify()
    judge.requests.clear()
    filled, _, _ = fill_with_a_kill(tmp_path / "filled", judge)
    set_config_value(filled, "model", "multilingual-e5-small")
    paths = filled
    with_requests = verify()
    print("verify without requests:", without["original"], "with:", with_requests["original"])
    gain = with_requests["original"]["hits"] - without["original"]["hits"]
    assert gain >= 0.1 * without["original"]["relevant"]
    assert with_requests["original"]["harmful"] <= without["original"]["harmful"]
