"""The one encoder of a stored memory line (group files and the trash): no writer can produce a
line that the store's reader refuses.

The reader (``memself.store.memory_store.parse_records``) quarantines a line longer than ``MAX_LINE_BYTES``,
one that is not UTF-8 or not JSON, and a record without an id or text or with a number rounding
cannot take. Every line memself writes comes from here, so every writer (the judge, the CLI, MCP,
merge, replace, delete, restore, the daily maintenance) has the same bound: a record that would
be too long is first trimmed by field priority (the free-form evidence and delete reason, which
say where a memory came from and are never injected), and refused with a message for the user
when that is not enough (the bulk is in the text or in fields a hand edit added, which are not
ours to cut). A refusal comes before the write, so nothing is written.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from memself.errors import InvalidInput
from memself.store.records import Memory, record_problem

# Far above any record memself or the original writes (400 characters of text plus the fields,
# a few KiB at most); a longer line is quarantined without being decoded or parsed.
MAX_LINE_BYTES = 64 * 1024
# Fields that may be cut to fit, first to last.
TRIM_ORDER = ("evidence", "deleteReason")
_ELLIPSIS = "…"
_ELLIPSIS_BYTES = len("\\u2026")  # escaped, as the ASCII fallback writes it

# One encoder for every record: ``json.dumps`` with options builds a new one per call, which is
# a large share of writing a big file.
RECORD_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
# A string the UTF-8 codec cannot take (a lone surrogate a hand edit wrote as ``\ud800``) is
# written escaped, as it was found, rather than as bytes the reader would refuse.
_ASCII_ENCODER = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"))


def encode_record(record: dict[str, Any]) -> bytes:
    """``record`` as one stored line with its newline; trims ``record`` in place when needed.

    Raises ``InvalidInput`` (nothing is written) when the reader would refuse the line."""
    problem = record_problem(record)
    if problem:
        raise InvalidInput(f"记录「{_shown_id(record)}」无法写入（{problem}），没有写入任何文件")
    line = _encode(record)
    for name in TRIM_ORDER:
        value = record.get(name)
        while len(line) > MAX_LINE_BYTES and isinstance(value, str) and value:
            # Each character dropped takes at least one byte off the line, and the ellipsis adds
            # at most its escaped form: a few rounds at most, each one shorter.
            keep = len(value) - (len(line) - MAX_LINE_BYTES) - _ELLIPSIS_BYTES
            value = value[:keep] + _ELLIPSIS if keep > 0 else ""
            record[name] = value
            line = _encode(record)
    if len(line) > MAX_LINE_BYTES:
        raise InvalidInput(
            f"记忆「{_shown_id(record)}」写成一行有 {len(line)} 字节，超过单行上限 "
            f"{MAX_LINE_BYTES // 1024} KiB（截短佐证后仍然超出，多出的是正文或手工加入的字段），"
            "没有写入任何文件；请在记忆文件里检查这条记录"
        )
    return line + b"\n"


def render_memory(memory: Memory) -> bytes:
    """``memory`` as one stored line; a trimmed evidence is kept on the memory too, so what a
    caller holds is what the file says."""
    record = memory.to_json()
    line = encode_record(record)
    if record.get("evidence") != memory.evidence and isinstance(record.get("evidence"), str):
        memory.evidence = record["evidence"]
    return line


def _reusable(encoder: json.JSONEncoder) -> Callable[[dict[str, Any]], str]:
    """``encoder.encode`` for a record, with the standard library's C encoder built once:
    ``JSONEncoder.encode`` builds it again for every call, which is most of the cost of writing
    a large file. The same C encoder with the same settings gives the same text; without one
    (another Python), or for a record it fails on, ``encoder.encode`` itself runs (and raises
    what it raises). No circular-reference markers: a record is built from parsed JSON and
    fields, never circular, and a failure is retried by ``encoder.encode``, which checks."""
    from json import encoder as stdlib

    make = getattr(stdlib, "c_make_encoder", None)
    if make is None:
        return encoder.encode
    strings = stdlib.encode_basestring_ascii if encoder.ensure_ascii else stdlib.encode_basestring
    try:
        once = make(
            None,
            encoder.default,
            strings,
            None,
            encoder.key_separator,
            encoder.item_separator,
            encoder.sort_keys,
            encoder.skipkeys,
            encoder.allow_nan,
        )
    except TypeError:  # another signature: the plain path
        return encoder.encode

    def encode(record: dict[str, Any]) -> str:
        try:
            return "".join(once(record, 0))
        except Exception:
            return encoder.encode(record)

    return encode


_encode_utf8 = _reusable(RECORD_ENCODER)
_encode_ascii = _reusable(_ASCII_ENCODER)


def _encode(record: dict[str, Any]) -> bytes:
    try:
        return _encode_utf8(record).encode("utf-8")
    except UnicodeEncodeError:
        return _encode_ascii(record).encode("ascii")


def _shown_id(record: dict[str, Any]) -> str:
    value = record.get("id")
    return value[:80] if isinstance(value, str) else "?"
