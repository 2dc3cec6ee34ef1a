"""One bad record must never blank a group: bad lines are quarantined one by one, kept byte for
byte on every rewrite, reported, and the rest of the group loads, is injected and can be written."""

from __future__ import annotations

import json

import pytest

from memself.hook.core import handle
from memself.hosts.base import EventKind, HookEvent
from memself.store.memory_store import MemoryStore
from memself.store.records import fmt_confidence, round_conf, sort_memories
from tests.support.cli import memself as _memself
from tests.support.helpers import T0, make_store, record

GOOD_A = record("a", "回答一律使用中文", 0.8)
GOOD_B = record("b", "改完代码不要自动 commit", 0.6)


def _line(raw: dict) -> bytes:
    return json.dumps(raw, ensure_ascii=False).encode("utf-8") + b"\n"


def _bad_conf(value: str) -> bytes:
    return (
        b'{"id":"bad","text":"\xe7\xbd\xae\xe4\xbf\xa1\xe5\xba\xa6\xe5\x9d\x8f\xe4\xba\x86\xe7\x9a\x84'
        b'\xe8\xae\xb0\xe5\xbf\x86","confidence":' + value.encode() + b',"category":"rule"}\n'
    )


BAD_LINES = {
    "invalid-utf8": b'{"id":"u","text":"\xff\xfe broken bytes here","confidence":0.5}\n',
    "not-json": b"{broken\n",
    "no-id": b'{"text":"\xe6\xb2\xa1\xe6\x9c\x89 id \xe7\x9a\x84\xe8\xae\xb0\xe5\xbf\x86"}\n',
    "nan": _bad_conf("NaN"),
    "infinity": _bad_conf("Infinity"),
    "minus-infinity": _bad_conf("-Infinity"),
    "overflow-1e308": _bad_conf("1e308"),
    "overflow-1e400": _bad_conf("1e400"),
    "deep-nesting": b"[" * 60000 + b"\n",
}


@pytest.fixture
def store() -> MemoryStore:
    return make_store()


def _seed(store: MemoryStore, bad: bytes) -> None:
    store.paths.group_file("rule").write_bytes(_line(GOOD_A) + bad + _line(GOOD_B))


def _event() -> HookEvent:
    return HookEvent("codebuddy", EventKind.SESSION_START, "", "s1", "", "", "/work", False)


@pytest.fixture
def no_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("memself.engine.client.ensure_started", lambda *a, **k: None)


@pytest.mark.parametrize("kind", list(BAD_LINES))
def test_bad_line_is_quarantined_and_the_rest_loads_writes_and_is_injected(
    store: MemoryStore, kind: str, no_engine: None
) -> None:
    bad = BAD_LINES[kind]
    _seed(store, bad)
    loaded = store.load_group("rule")
    assert sorted(m.id for m in loaded.memories) == ["a", "b"]
    assert [b.line_no for b in loaded.bad_lines] == [2]
    # The session start still injects the good rules.
    context = handle(_event(), T0, store.paths).context
    assert "回答一律使用中文" in context and "改完代码不要自动 commit" in context
    # Every kind of write works and keeps the bad line byte for byte.
    store.reinforce("a", T0)
    created = store.create("新加的一条规则正文", "rule", T0)
    store.delete([created.id], T0)
    store.restore(created.id, T0)
    data = store.paths.group_file("rule").read_bytes()
    assert bad in data
    assert {m.id for m in store.read_group("rule")} == {"a", "b", created.id}


def test_a_20_mb_line_is_not_parsed(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch, no_engine: None
) -> None:
    huge = b'{"id":"huge","text":"' + b"x" * (20 * 1024 * 1024) + b'","confidence":0.5}\n'
    _seed(store, huge)
    sizes: list[int] = []
    real_loads = json.loads

    def spying(text: str | bytes, *args: object, **kwargs: object) -> object:
        sizes.append(len(text))
        return real_loads(text, *args, **kwargs)

    monkeypatch.setattr(json, "loads", spying)
    loaded = store.load_group("rule")
    assert sorted(m.id for m in loaded.memories) == ["a", "b"]
    assert len(loaded.bad_lines) == 1 and "过长" in loaded.bad_lines[0].reason
    assert max(sizes) < 64 * 1024
    context = handle(_event(), T0, store.paths).context
    assert "回答一律使用中文" in context and "x" * 1000 not in context
    store.reinforce("b", T0)
    assert huge in store.paths.group_file("rule").read_bytes()


def test_bad_trash_lines_are_kept_on_rewrite(store: MemoryStore) -> None:
    bad = BAD_LINES["invalid-utf8"] + BAD_LINES["nan"]
    store.paths.trash.write_bytes(bad)
    created = store.create("马上要被删掉的规则", "rule", T0)
    store.delete([created.id], T0)
    assert [e.memory.id for e in store.trash_entries()] == [created.id]
    store.restore(created.id, T0)
    assert store.paths.trash.read_bytes() == bad


def test_rounding_never_raises() -> None:
    for value in (float("nan"), float("inf"), -float("inf"), 1e308, -1e308, 1e300):
        round_conf(value)
        fmt_confidence(value)
    assert round_conf(0.45 - 0.05) == 0.4


def test_a_record_with_a_line_separator_in_its_text_is_one_record(store: MemoryStore) -> None:
    # json.dumps(ensure_ascii=False) writes U+2028 raw; it is not a line break in JSON Lines.
    store.create("第一段\u2028第二段都是规则", "rule", T0)
    store.create("另一条普通的规则", "rule", T0)
    loaded = store.load_group("rule")
    assert not loaded.bad_lines and len(loaded.memories) == 2
    assert sort_memories(loaded.memories)


def test_list_names_file_line_and_reason(store: MemoryStore) -> None:
    _seed(store, BAD_LINES["invalid-utf8"])
    store.paths.trash.write_bytes(BAD_LINES["nan"])
    result = _memself("list")
    assert result.returncode == 0
    assert "rule    2 条" in result.stdout
    assert "rule.jsonl 第 2 行无法读取（不是合法的 UTF-8）" in result.stderr
    assert "trash.jsonl 第 1 行无法读取" in result.stderr and "置信度" in result.stderr
    problems = json.loads(_memself("list", "--json").stdout)["problems"]
    assert {(p["file"], p["line"]) for p in problems} == {("rule.jsonl", 2), ("trash.jsonl", 1)}


def test_doctor_reports_quarantined_lines(store: MemoryStore) -> None:
    from memself.doctor import check_data

    _seed(store, BAD_LINES["overflow-1e308"])
    check = check_data(store.paths)
    assert check.ok is False
    assert "rule.jsonl 第 2 行" in check.summary and "置信度" in check.summary
    assert check.fix


def test_memory_list_tool_mentions_quarantined_lines(store: MemoryStore) -> None:
    from memself.mcp_server import MemoryTools

    _seed(store, BAD_LINES["invalid-utf8"])
    text = MemoryTools(store.paths, "claude", now_fn=lambda: T0).call("memory_list", {})
    assert "rule    2 条" in text and "rule.jsonl 第 2 行" in text and "已隔离" in text
    assert "broken bytes" not in text  # the line's content is data, never shown to the model
