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
