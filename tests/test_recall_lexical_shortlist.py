"""Project facts' lexical overlap is scored on a shortlist (the facts with the best dense scores
that the workspace sees), not on postings over every fact: the same scores where the group is
small, bounded work where it is not, and nothing built over the whole group at start."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from memself.recall.lexical import LexicalIndex, overlap_scores
from memself.recall.pool import RecallPool
from memself.recall.scoring import LEXICAL_SHORTLIST, Recaller, load_recaller
from tests.support.synthetic_pool import PARAMS, PROMPTS, WORKSPACES, synthetic

TEXTS = [
    "支付页灰度开关是 pay_new_flow，改动前先问负责人",
    "mongo 连接串在 config/prod.yaml 的 database.uri 下",
    "CI secrets live in the GitHub Actions environment named prod-deploy",
    "k8s namespace for staging is pay-staging; never kubectl apply to prod by hand",
    "回答用中文",
    "",
]
QUERIES = [
    "pay_new_flow 在哪改",
    "mongo 连接串",
    "CI secrets config",
    "k8s ns",
    "Redis 和 Memcached 有什么区别",
]
SIZE = LEXICAL_SHORTLIST["project"]


@pytest.fixture(scope="module")
def recaller(e5_encoder: object, shared_model_cache: Path) -> Recaller:
    rec = load_recaller(e5_encoder, "multilingual-e5-small", cache_dir=shared_model_cache)  # type: ignore[arg-type]
    assert rec.scoring.lexical["project"] > 0  # the shipped calibration weighs it: the tests mean something
    return rec


@pytest.mark.parametrize("tau", [5.0, 10.0, 20.0])
def test_overlap_without_postings_equals_the_postings_scores(tau: float) -> None:
    index = LexicalIndex()
    index.set_texts(TEXTS)
    for query in QUERIES:
        expected = index.scores(query, tau)
        assert np.allclose(overlap_scores(query, TEXTS, tau), expected, atol=1e-6)
    assert index.scores(QUERIES[0], tau)[0] > 0  # a shared identifier counts


@pytest.mark.parametrize("workspace", [None, "", *WORKSPACES[1:], "/srv/repos/unknown"])
def test_only_the_best_dense_facts_the_workspace_sees_get_lexical_overlap(
    recaller: Recaller, workspace: str | None
) -> None:
    memories, matrix, rows, views = synthetic(3000, seed=5)
    pool = RecallPool(memories, rows, views)
    members = pool.members("project", workspace)
    assert len(members) > SIZE
    for prompt in PROMPTS:
        parts = recaller.parts(prompt, pool, matrix, matrix_key="m", workspace=workspace)
        order = members[np.lexsort((members, -parts.dense[members]))]
        shortlist = order[:SIZE]
        rest = np.setdiff1d(np.flatnonzero(pool.group == 1), shortlist)  # other workspaces' too
        text_only, best = pool.shortlist_lexical(prompt, shortlist, recaller.scoring.lexical_tau)
        assert np.array_equal(parts.lexical_text[shortlist], text_only)
        assert np.array_equal(parts.lexical[shortlist], best)
        assert not parts.lexical[rest].any() and not parts.lexical_text[rest].any()
        # Every synthetic text shares words with these prompts, or none does: then the checks
        # above prove nothing, so the one below asks that the prompts that share do score.
        if overlap_scores(prompt, [memories[0].text])[0] > 0:
            assert (text_only > 0).all()
            rules = np.flatnonzero(pool.group == 0)  # scored whole, on their postings
            assert (parts.lexical_text[rules] > 0).all()


def test_where_the_group_fits_the_shortlist_the_scores_are_the_postings(recaller: Recaller) -> None:
    memories, matrix, rows, views = synthetic(3000, seed=5)
    small = [i for i in range(len(memories)) if memories[i].active][:SIZE]
    pool = RecallPool([memories[i] for i in small], [rows[i] for i in small], [views[i] for i in small])
    shared = 0
    for prompt in PROMPTS:
        parts = recaller.parts(prompt, pool, matrix, matrix_key="m")
        text_only, best = pool.lexical_scores(prompt, ("project",), recaller.scoring.lexical_tau)
        project = pool.group == 1
        assert np.allclose(parts.lexical_text[project], text_only[project], atol=1e-6)
        assert np.allclose(parts.lexical[project], best[project], atol=1e-6)
        shared += int(best[project].any())
    assert shared == 3  # three of the prompts share words with the facts


def test_a_large_pool_cuts_no_more_than_the_rules_and_a_shortlist(recaller: Recaller) -> None:
    memories, matrix, rows, views = synthetic(6000, seed=9)
    pool = RecallPool(memories, rows, views)
    recaller.recall(PROMPTS[0], pool, matrix, PARAMS, matrix_key="m", workspace=WORKSPACES[1])
    rules = sum(m.category == "rule" for m in memories)
    # The postings' token cache holds the rules' texts and requests, never the 5,400 facts'.
    assert 0 < len(recaller._tokens) <= rules * 3


def test_with_only_project_facts_weighted_rules_get_no_overlap(recaller: Recaller) -> None:
    scoring = replace(recaller.scoring, lexical={"rule": 0.0, "project": 0.05})
    only_project = Recaller(recaller.encoder, recaller.space, scoring)
    memories, matrix, rows, views = synthetic(3000, seed=5)
    pool = RecallPool(memories, rows, views)
    parts = only_project.parts(PROMPTS[0], pool, matrix, matrix_key="m")
    rules, project = pool.group == 0, pool.group == 1
    assert not parts.lexical[rules].any() and not parts.lexical_text[rules].any()
    assert (parts.lexical[project] > 0).sum() == SIZE
    # A fact's best over its requests is kept apart from its text's overlap: this prompt shares
    # words with the request "上线检查" only.
    parts = only_project.parts("上线前要检查什么", pool, matrix, matrix_key="m")
    assert not parts.lexical_text[project].any()
    assert (parts.lexical[project] > 0).any()
