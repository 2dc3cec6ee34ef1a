"""Going back to the original after memself rewrote memories.

memself reads the original's ``embeddings.jsonl`` once and never writes it again (its own index
is binary). The original, run again, keeps using the vector it has for each id: a memory whose
text memself merged or replaced is then recalled by its old meaning. ``memself doctor`` says so
while there is still time, and what to run in the original.
"""

from __future__ import annotations

import json
import os

from memself.doctor import check_original_vectors
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from tests.support.helpers import T0, days, make_store, record, write_records


def _original_vectors(paths: DataPaths, ids: list[str], written_at: float) -> None:
    lines = [json.dumps({"id": mid, "v": [0.1] * 768, "ev": 4}) for mid in ids]
    paths.legacy_embeddings.write_text("\n".join(lines), "utf-8")  # the original writes no last \n
    os.utime(paths.legacy_embeddings, (written_at, written_at))


def _store_with_vectors() -> MemoryStore:
    store = make_store()
    write_records(
        store,
        "rule",
        [
            record("mem-a", "回答一律使用中文，代码注释也用中文", 0.8, last=T0 - days(5)),
            record("mem-b", "改完代码不要自动 git commit，等我确认", 0.7, last=T0 - days(5)),
        ],
    )
    _original_vectors(store.paths, ["mem-a", "mem-b"], (T0 - days(1)).timestamp())
    return store


def test_doctor_warns_when_memself_rewrote_a_memory_the_original_has_a_vector_for() -> None:
    store = _store_with_vectors()
    store.replace("mem-a", "回答一律使用简体中文，代码注释用英文", T0)
    check = check_original_vectors(store.paths)
    assert check is not None and check.ok is None  # not a fault while memself is in use
    assert "1 条" in check.summary and "embeddings.jsonl" in check.summary
    assert "npm run rebuild-index" in check.fix


def test_a_merge_is_seen_too() -> None:
    store = _store_with_vectors()
    store.merge_pair("mem-b", "mem-a", "改完代码不要自动 git commit；回答一律使用中文", T0)
    check = check_original_vectors(store.paths)
    assert check is not None and "1 条" in check.summary


def test_nothing_to_say_when_the_vectors_are_newer_or_absent() -> None:
    store = _store_with_vectors()
    store.reinforce("mem-a", T0)  # confidence only: the vector still matches the text
    check = check_original_vectors(store.paths)
    assert check is not None and check.ok is True
    store.replace("mem-a", "回答一律使用简体中文，代码注释用英文", T0)
    # The original's rebuild-index ran afterwards: every vector is made from the current text.
    os.utime(store.paths.legacy_embeddings, ((T0 + days(1)).timestamp(),) * 2)
    check = check_original_vectors(store.paths)
    assert check is not None and check.ok is True
    store.paths.legacy_embeddings.unlink()
    assert check_original_vectors(store.paths) is None
