"""What the original plugin's strict reader (its daily maintenance) needs of every line of a group
file: a JSON object with a non-empty text and these fields, by type. A blank line is skipped, as
the original skips it."""

from __future__ import annotations

import json
from pathlib import Path

ORIGINAL_FIELDS = {
    "id": str,
    "text": str,
    "confidence": (int, float),
    "category": str,
    "firstSeen": str,
    "lastSeen": str,
    "deprecated": bool,
    "createdAt": str,
}


def original_reads(path: Path) -> list[dict]:
    """Every record of ``path`` as the original reads it; fails on a line it would refuse."""
    records = []
    for line in path.read_text("utf-8").splitlines():
        if not line.strip():
            continue
        raw = json.loads(line)
        assert isinstance(raw, dict) and raw.get("text"), line
        for key, kind in ORIGINAL_FIELDS.items():
            assert isinstance(raw.get(key), kind), (key, line)
        records.append(raw)
    return records
