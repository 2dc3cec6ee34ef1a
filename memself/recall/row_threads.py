"""A row-wise computation over a large matrix, split across threads.

Scoring a prompt against a pool reads every row of the vector matrix once; at a hundred thousand
memories that read is bound by memory bandwidth, and one core cannot draw all of it. numpy
releases the GIL inside the product, so row blocks on a few threads finish together in a fraction
of the time. Each row's result is computed by the same kernel over the same columns, so it is bit
for bit what one call over the whole matrix gives (``tests/test_row_threads.py``). Small matrices
stay on the calling thread: handing work over costs more than it saves there.

Not BLAS threads: OpenBLAS keeps its threads spinning after each call, which on a laptop burns a
core for as long as the engine lives; these threads sleep between prompts.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from itertools import pairwise
from threading import Lock

# Rows below which one thread does it all, and the most threads a product is split over (the
# memory bus saturates after a few).
MIN_ROWS = 32_768
MAX_THREADS = 4
# Block boundaries fall on multiples of this, so kernels see the same row alignment.
ALIGN = 64

_pool: ThreadPoolExecutor | None = None
_pool_lock = Lock()


def thread_count(cpus: int | None) -> int:
    """Threads a large product is split over on a machine with ``cpus`` cores."""
    return max(1, min(MAX_THREADS, cpus or 1))


@cache
def _machine_threads() -> int:
    # os.cpu_count() reads /sys on every call; the core count does not change under a process.
    return thread_count(os.cpu_count())


def _executor(workers: int) -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="memself-rows")
        return _pool


def blocks(n: int, parts: int) -> list[tuple[int, int]]:
    """``[start, stop)`` row ranges covering ``range(n)``: ``parts`` of them (fewer when small),
    inner boundaries on multiples of ``ALIGN``."""
    if parts <= 1 or n < MIN_ROWS:
        return [(0, n)]
    step = -(-n // parts // ALIGN) * ALIGN
    return list(pairwise([*range(0, n, step), n]))


def run_rows(n: int, fill: Callable[[int, int], None], threads: int | None = None) -> None:
    """Call ``fill(start, stop)`` over row blocks covering ``range(n)``: the last block on the
    calling thread, the others on the shared pool; returns when all are done (and raises the
    first block's error, if any). ``fill`` writes its rows of a preallocated output."""
    parts = blocks(n, _machine_threads() if threads is None else threads)
    if len(parts) == 1:
        fill(0, n)
        return
    pool = _executor(MAX_THREADS - 1)
    futures = [pool.submit(fill, a, b) for a, b in parts[:-1]]
    try:
        fill(*parts[-1])
    finally:
        for f in futures:
            f.result()
