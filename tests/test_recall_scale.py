"""Recall over a large pool keeps what it derives from the pool (members per workspace, per-group
lookups, extra floors) between prompts: the kept arrays must give exactly the scores and hits a
pool scored from scratch gives, whatever order workspaces and prompts come in."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memself.recall.pool import RecallPool
from memself.recall.scoring import Recaller, extra_floors, fuse, load_recaller, per_group
from memself.store.records import GROUPS
from tests.support.synthetic_pool import PARAMS, PROMPTS, WORKSPACES, synthetic


def hits(
    recaller: Recaller, pool: RecallPool, matrix: np.ndarray, prompt: str, workspace: str | None
) -> object:
    result = recaller.recall(prompt, pool, matrix, PARAMS, matrix_key="m", workspace=workspace)
    assert result.hit_ids
    return result.to_detail()  # every hit's id, scores and view, and each group's gate numbers


@pytest.fixture(scope="module")
def recaller(e5_encoder: object, shared_model_cache: Path) -> Recaller:
    return load_recaller(e5_encoder, "multilingual-e5-small", cache_dir=shared_model_cache)  # type: ignore[arg-type]


@pytest.mark.parametrize("shuffled", [True, False])
def test_a_pool_scored_many_times_recalls_exactly_what_a_fresh_pool_recalls(
    recaller: Recaller, shuffled: bool
) -> None:
    memories, matrix, rows, views = synthetic(6000, seed=7)
    if not shuffled:  # matrix rows in pool order: the dense scores are taken without a gather
        matrix = np.concatenate([matrix[rows], np.delete(matrix, rows, axis=0)])
        rows = list(range(len(memories)))
        views = [[] for _ in memories]
    kept = RecallPool(memories, rows, views)
    assert kept.rows_are_positions is not shuffled
    # Warm the pool's kept arrays with every workspace first, then ask in another order: a kept
    # array of one workspace or group answering for another would show.
    for workspace in [*WORKSPACES, None, "/srv/repos/unknown"]:
        hits(recaller, kept, matrix, PROMPTS[0], workspace)
    for prompt in PROMPTS:
        for workspace in [None, *reversed(WORKSPACES), "/srv/repos/unknown"]:
            fresh = RecallPool(memories, rows, views)
            assert hits(recaller, kept, matrix, prompt, workspace) == hits(
                recaller, fresh, matrix, prompt, workspace
            )


def test_the_kept_arrays_equal_the_ones_computed_over_every_memory(recaller: Recaller) -> None:
    memories, matrix, rows, views = synthetic(3000, seed=11)
    pool = RecallPool(memories, rows, views)
    for prompt in PROMPTS:
        parts = recaller.parts(prompt, pool, matrix, matrix_key="m")
        assert np.array_equal(parts.dense_text, recaller.dense_scores(prompt, matrix, "m")[pool.rows])
        penalty = {"rule": 1.0, "project": 0.7}
        for weights in (recaller.scoring.lexical, {"rule": 0.25}):
            plain = fuse(parts.dense, parts.lexical, pool.group, 0.4, weights, penalty, parts.entity)
            kept = fuse(
                parts.dense, parts.lexical, pool.group, 0.4, weights, penalty, parts.entity, pool.by_group
            )
            assert plain.tobytes() == kept.tobytes()
    offset = recaller.scoring.view_offset
    assert np.array_equal(recaller.extra_floors(pool), extra_floors(pool.group, pool.has_views, offset))
    assert recaller.extra_floors(pool).any()  # the pool has views: the check above could fail
    codes = {w: i for i, w in enumerate(dict.fromkeys(m.workspace for m in memories))}
    for group in [None, *GROUPS]:
        for workspace in [None, *WORKSPACES, "/srv/repos/unknown"]:
            expected = [
                i
                for i, m in enumerate(memories)
                if m.active
                and (group is None or m.category == group)
                and (workspace is None or m.workspace in ("", workspace))
            ]
            assert pool.members(group, workspace).tolist() == expected
    assert codes  # four workspaces, global included
    assert np.array_equal(pool.by_group({"rule": 0.5}), per_group({"rule": 0.5})[pool.group])
