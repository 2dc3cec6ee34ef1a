"""A command that was asked for several things exits non-zero when any of them was not done, and
says which (in Chinese); what it did do stays done and is reported."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from memself.cli import main
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from tests.support.cli import memself
from tests.support.judge_helpers import configure
from tests.support.judge_server import FakeJudge, Reply, plain, running_judge
from tests.support.views_helpers import WritingJudge, made_up, original_store, sent_memories


def _added(text: str) -> str:
    assert memself("rule", "add", text).returncode == 0
    return next(r["id"] for r in json.loads(memself("read", "rule", "--json").stdout) if r["text"] == text)


def test_delete_with_one_unknown_id_deletes_the_others_and_exits_1() -> None:
    kept, gone = _added("回答一律使用中文"), _added("提交信息用英文写")
    result = memself("delete", gone, "mem-nope-1234")
    assert result.returncode == 1, result.stdout
    assert "已删除 1 条" in result.stdout and gone in result.stdout
    assert result.stderr.startswith("错误：") and "mem-nope-1234" in result.stderr
    assert gone not in result.stderr and "Traceback" not in result.stderr
    assert [t["id"] for t in json.loads(memself("trash", "--json").stdout)] == [gone]
    assert [r["id"] for r in json.loads(memself("read", "rule", "--json").stdout)] == [kept]


def test_delete_of_known_ids_only_exits_0() -> None:
    first, second = _added("回答一律使用中文"), _added("提交信息用英文写")
    result = memself("delete", first, second, first)
    assert result.returncode == 0 and "已删除 2 条" in result.stdout and result.stderr == ""


def test_restore_of_an_unknown_id_exits_1() -> None:
    result = memself("restore", "mem-nope-1234")
    assert result.returncode == 1 and "mem-nope-1234" in result.stderr


def test_restore_of_several_restores_what_it_can_and_exits_1_naming_the_rest() -> None:
    first, second, kept = _added("回答一律使用中文"), _added("提交信息用英文写"), _added("缩进一律用四个空格")
    assert memself("delete", first, second).returncode == 0
    result = memself("restore", first, "mem-nope-1234", second, kept)
    assert result.returncode == 1, result.stdout
    assert result.stdout.count("已恢复到 rule") == 2 and first in result.stdout and second in result.stdout
    assert result.stderr.startswith("错误：") and len(result.stderr.strip().splitlines()) == 1
    assert "回收站里没有「mem-nope-1234」" in result.stderr and f"回收站里没有「{kept}」" in result.stderr
    assert json.loads(memself("trash", "--json").stdout) == []
    assert len(json.loads(memself("read", "rule", "--json").stdout)) == 3


# -- views fill: memories asked for that got no requests ------------------------------------------


@pytest.fixture
def judge() -> Iterator[FakeJudge]:
    with running_judge() as server:
        yield server


def _views_store(n: int) -> tuple[DataPaths, MemoryStore]:
    return original_store(n, "exit")


class SkipsOne:
    """Answers for every memory sent but the one whose text names svc1."""

    def __call__(self, body: dict[str, Any]) -> Reply:
        answer = {m["id"]: made_up(m["text"]) for m in sent_memories(body) if "svc1 " not in m["text"]}
        return plain(json.dumps(answer, ensure_ascii=False))


def test_views_fill_that_leaves_memories_unfilled_exits_1(judge: FakeJudge) -> None:
    paths, store = _views_store(3)
    configure(paths, judge.url)
    judge.responder = SkipsOne()
    result = CliRunner().invoke(main, ["views", "fill"])
    assert result.exit_code == 1, result.output
    assert "2 条记忆补上了适用场景" in result.output and "mem-exit001-abcdef" in result.output
    assert sum(bool(m.appliesWhen) for m in store.all()) == 2


def test_views_fill_whose_endpoint_fails_exits_1(judge: FakeJudge) -> None:
    paths, store = _views_store(3)
    configure(paths, judge.url)
    judge.responder = lambda body: Reply("status", '{"error":"down"}', 503)
    result = CliRunner().invoke(main, ["views", "fill"])
    assert result.exit_code == 1, result.output
    assert "接口出错" in result.output and not any(m.appliesWhen for m in store.all())


def test_views_fill_that_fills_everything_exits_0(judge: FakeJudge) -> None:
    paths, _ = _views_store(3)
    configure(paths, judge.url)
    judge.responder = WritingJudge()
    result = CliRunner().invoke(main, ["views", "fill"])
    assert result.exit_code == 0 and "3 条记忆补上了适用场景" in result.output


# -- rebuild-index: memories whose vector could not be made ------------------------------------


class FailsOnMarker:
    """The real encoder, failing for any batch holding a text with ``marker`` (a fault the real
    model does not produce on demand)."""

    def __init__(self, encoder: Any, marker: str) -> None:
        self._encoder = encoder
        self._marker = marker

    def __getattr__(self, name: str) -> Any:
        return getattr(self._encoder, name)

    def _check(self, texts: list[str]) -> None:
        if any(self._marker in t for t in texts):
            raise RuntimeError("encoder failed")

    def encode_passages(self, texts: list[str]) -> Any:
        self._check(texts)
        return self._encoder.encode_passages(texts)

    def encode_queries(self, texts: list[str]) -> Any:
        self._check(texts)
        return self._encoder.encode_queries(texts)


def test_rebuild_index_with_a_failed_text_exits_1(
    e5_encoder: Any, model_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import memself.model.encoder

    paths = DataPaths.default()
    paths.ensure()
    store = MemoryStore(paths)
    now = datetime.now(timezone.utc)
    store.add("回答和代码注释里都不要用 emoji", "rule", now)
    bad = store.add("这一条的向量编码会失败：坏", "project", now).memory
    failing = FailsOnMarker(e5_encoder, "坏")
    monkeypatch.setattr(memself.model.encoder, "load_encoder", lambda *a, **k: failing)
    result = CliRunner().invoke(main, ["rebuild-index"])
    assert result.exit_code == 1, result.output
    assert "已重建 1 条向量" in result.output and bad.id in result.output
