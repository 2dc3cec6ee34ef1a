"""Redaction measured on a corpus: every secret in it is hidden, and look-alikes (sentences about
passwords with none in them, versions, hashes, ordinary numbers) are almost never touched.

The corpus is ``data/redaction_corpus.json``; ``bench/redaction_corpus.py`` prints the same
numbers and lists each failure. ``data/redaction_heldout.json`` was written after the rules and is
never tuned on: it holds the rules to the share they reached when it was first measured.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memself.text.input_filter import prepare_for_judge
from memself.text.redact import REDACTED, redact

CORPUS_PATH = Path(__file__).parent / "data" / "redaction_corpus.json"
HELDOUT_PATH = Path(__file__).parent / "data" / "redaction_heldout.json"
CORPUS: dict[str, Any] = json.loads(CORPUS_PATH.read_text(encoding="utf-8"))
SECRETS: list[dict[str, Any]] = CORPUS["secrets"]
LOOKALIKES: list[dict[str, Any]] = CORPUS["lookalikes"]
# At most this share of look-alikes may come back changed in any way.
MAX_TOUCHED_SHARE = 0.05


def test_corpus_is_well_formed() -> None:
    assert len(SECRETS) >= 60
    assert len(LOOKALIKES) >= 60
    ids = [e["id"] for e in SECRETS + LOOKALIKES]
    assert len(ids) == len(set(ids))
    for entry in SECRETS:
        assert entry["secrets"], entry["id"]
        for secret in entry["secrets"]:
            assert secret in entry["text"], entry["id"]
    for entry in LOOKALIKES:
        assert REDACTED not in entry["text"], entry["id"]


@pytest.mark.parametrize("entry", SECRETS, ids=[e["id"] for e in SECRETS])
def test_secret_is_redacted(entry: dict[str, Any]) -> None:
    out = redact(entry["text"])
    assert [s for s in entry["secrets"] if s in out] == [], out
    # The judge's path cleans and collapses whitespace before redacting; it must not leak either.
    sent = prepare_for_judge(entry["text"])
    assert [s for s in entry["secrets"] if s in sent] == [], sent


def test_lookalikes_are_rarely_touched() -> None:
    touched = [(e["id"], redact(e["text"])) for e in LOOKALIKES if redact(e["text"]) != e["text"]]
    detail = "\n".join(f"{i}: {out}" for i, out in touched)
    assert len(touched) <= MAX_TOUCHED_SHARE * len(LOOKALIKES), (
        f"{len(touched)}/{len(LOOKALIKES)} look-alikes changed:\n{detail}"
    )


# As first measured, after the rules it was written against: 35 of 40 hidden, 2 of 40 touched
# (1 since probes written later made a value far from its key need a symbol).
HELDOUT_MIN_HIDDEN = 35
HELDOUT_MAX_TOUCHED = 2


def test_heldout_set_holds_its_first_measure() -> None:
    heldout = json.loads(HELDOUT_PATH.read_text(encoding="utf-8"))
    ids = {e["id"] for e in SECRETS + LOOKALIKES}
    assert not ids & {e["id"] for e in heldout["secrets"] + heldout["lookalikes"]}
    hidden = [e for e in heldout["secrets"] if not any(s in redact(e["text"]) for s in e["secrets"])]
    touched = [e["id"] for e in heldout["lookalikes"] if redact(e["text"]) != e["text"]]
    assert len(heldout["secrets"]) >= 40 and len(heldout["lookalikes"]) >= 40
    assert len(hidden) >= HELDOUT_MIN_HIDDEN, [e["id"] for e in heldout["secrets"] if e not in hidden]
    assert len(touched) <= HELDOUT_MAX_TOUCHED, touched
