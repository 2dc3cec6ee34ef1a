"""The one encoder of stored lines: whatever record it is given, the line it returns is one the
reader accepts, or it refuses with a message; trimming touches only the fields it may cut."""

from __future__ import annotations

import json
import random

import pytest

from memself.errors import InvalidInput
from memself.store.memory_store import parse_records
from memself.store.recordlines import MAX_LINE_BYTES, encode_record

ALPHABET = ["a", "证", "\ud800", '"', "\\", "\n", "\x01", "😀", "…", " "]


def text(rng: random.Random, size: int) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(size))


@pytest.mark.parametrize("seed", range(30))
def test_every_line_is_one_the_reader_accepts_or_the_record_is_refused(seed: int) -> None:
    rng = random.Random(seed)
    record = {
        "id": f"mem-{seed}",
        "text": "提交前先跑测试" + text(rng, rng.choice([0, 100, 30_000])),
        "confidence": 0.5,
        "category": "rule",
        "evidence": text(rng, rng.choice([0, 10, 20_000, 70_000])),
        "deleteReason": text(rng, rng.choice([0, 10, 30_000])),
        "notes": text(rng, rng.choice([0, 10, 15_000])),
    }
    kept = {k: record[k] for k in ("id", "text", "notes")}
    try:
        line = encode_record(record)
    except InvalidInput as exc:
        assert "超过单行上限 64 KiB" in str(exc) and "没有写入任何文件" in str(exc)
        return
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert len(line) - 1 <= MAX_LINE_BYTES
    records, bad = parse_records(line)
    assert bad == [] and len(records) == 1
    assert {k: records[0][k] for k in kept} == kept  # only the evidence and delete reason are cut
    assert records[0] == json.loads(json.dumps(record))


def test_a_record_the_reader_would_refuse_is_not_written() -> None:
    with pytest.raises(InvalidInput):
        encode_record({"id": "mem-1", "text": "正文足够长的记忆", "confidence": float("nan")})
    with pytest.raises(InvalidInput):
        encode_record({"id": "mem-1", "text": "   "})


def test_a_line_is_byte_for_byte_what_the_standard_encoder_writes() -> None:
    # Lines are written through a C encoder built once (much faster on a large file); every value
    # a record can carry must come out exactly as ``json.dumps`` with the same options writes it.
    records = [
        {"id": "a", "text": '换行\u2028分隔\u2029 "引号" \\ \t \x01 é 😀', "confidence": 0.1 + 0.2},
        {"id": "b", "text": "numbers", "confidence": 1e-7, "gainToday": -0.0, "big": 10**30, "f": 1.7e298},
        {"id": "c", "text": "nested", "extra": {"k": [1, None, True, False, {"x": []}]}, "e": ""},
        {"id": "d", "text": "lone \ud800 surrogate", "confidence": 0.5},  # written escaped
    ]
    for record in records:
        expected = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
        try:
            wanted = expected.encode("utf-8")
        except UnicodeEncodeError:
            wanted = json.dumps(record, ensure_ascii=True, separators=(",", ":")).encode("ascii")
        assert encode_record(dict(record)) == wanted + b"\n"


def test_a_value_json_cannot_write_still_fails_as_the_standard_encoder_fails() -> None:
    circular: dict[str, object] = {"id": "a", "text": "circular record", "confidence": 0.5}
    circular["self"] = circular
    with pytest.raises(ValueError, match="Circular reference"):
        encode_record(circular)
    with pytest.raises(TypeError, match="not JSON serializable"):
        encode_record({"id": "a", "text": "a set inside", "confidence": 0.5, "x": {1, 2}})
