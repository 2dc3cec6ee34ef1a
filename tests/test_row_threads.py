"""Scoring a large pool on several threads gives bit for bit what one thread gives."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from memself.recall import row_threads
from memself.recall.row_threads import ALIGN, MIN_ROWS, blocks, run_rows, thread_count


@pytest.mark.parametrize("n", [0, 1, MIN_ROWS - 1, MIN_ROWS, 100_003])
@pytest.mark.parametrize("parts", [1, 2, 3, 4])
def test_blocks_cover_every_row_once_on_aligned_boundaries(n: int, parts: int) -> None:
    got = blocks(n, parts)
    assert got[0][0] == 0 and got[-1][1] == n
    assert all(a < b or n == 0 for a, b in got)
    assert all(got[i][1] == got[i + 1][0] for i in range(len(got) - 1))
    assert all(b % ALIGN == 0 for _, b in got[:-1])
    assert len(got) == (1 if n < MIN_ROWS else parts)


def test_thread_count_is_bounded() -> None:
    assert thread_count(None) == 1 and thread_count(1) == 1 and thread_count(2) == 2
    assert thread_count(64) == row_threads.MAX_THREADS


def test_split_scores_equal_one_call_and_use_other_threads() -> None:
    rng = np.random.default_rng(7)
    matrix = rng.standard_normal((100_003, 384)).astype(np.float32)
    q = rng.standard_normal((2, 384)).astype(np.float32)
    norms = np.linalg.norm(matrix, axis=1).astype(np.float32)
    whole = ((matrix @ q.T - 0.25) / norms[:, None]).max(axis=1)
    out = np.empty(len(matrix), dtype=np.float32)
    seen: set[int] = set()

    def fill(start: int, stop: int) -> None:
        seen.add(threading.get_ident())
        scores = matrix[start:stop] @ q.T - 0.25
        scores /= norms[start:stop, None]
        out[start:stop] = scores.max(axis=1)

    run_rows(len(matrix), fill, threads=4)
    assert np.array_equal(out, whole)
    assert len(seen) > 1


def test_an_error_in_any_block_reaches_the_caller() -> None:
    def fill(start: int, stop: int) -> None:
        if start == 0:
            raise ValueError("block")

    with pytest.raises(ValueError, match="block"):
        run_rows(MIN_ROWS * 2, fill, threads=2)
