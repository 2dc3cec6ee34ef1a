"""What a prompt pays for a large pool, apart: the scan of the vector matrix and what it does to
the prompt's encode.

    TMPDIR=/dev/shm .venv/bin/python bench/bench_scan_cost.py [--sizes 1000,100000] [--runs 30]

For each size, a synthetic store with an index of random unit vectors (as ``bench_scale.py
--synthetic-vectors`` writes it) is loaded into an in-process ``RecallService`` (the engine's
service, warmed up as the engine warms it), and these are timed, medians of ``--runs``, each row
run ``--runs`` times in a row (its steady state: the encode alone never follows a scan, the
second encode row always does):

- the product of the matrix with one prompt vector, on one thread and split over the row threads
  (``memself.recall.row_threads``);
- the prompt's encode alone, and the same encode right after a read of the whole matrix (each
  prompt's encode follows the previous prompt's scan);
- the service's whole recall op (encode, scoring, gate, the hits' confidence), as the engine
  answers ``recall``: the same prompt again, and a prompt never seen before (its encode and the
  project facts it shortlists for the lexical overlap are new).

A temporary data directory with the offline model; nothing of the user's is touched.
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the engine sets it

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from bench.bench_scale import PROMPT, prepare  # noqa: E402

NOW = datetime(2026, 12, 4, tzinfo=timezone.utc)


def measure(home: Path, runs: int) -> dict[str, float]:
    import numpy as np

    from memself.paths import DataPaths
    from memself.recall.row_threads import run_rows
    from memself.warm.service import RecallService

    service = RecallService(DataPaths(home))
    service.warm_up()
    recaller, _, index = service._loaded()
    matrix = np.asarray(index.matrix)
    q = recaller.space.project(recaller.encoder.encode_queries([PROMPT]))
    out = np.empty((len(matrix), 1), dtype=np.float32)
    fresh = itertools.count()

    def split() -> None:
        def fill(start: int, stop: int) -> None:
            np.matmul(matrix[start:stop], q.T, out=out[start:stop])

        run_rows(len(matrix), fill)

    def encode() -> None:
        recaller.encoder.encode_queries([PROMPT])

    def read_then_encode() -> None:
        matrix @ q.T
        encode()

    rows: dict[str, Callable[[], object]] = {
        "product, one thread": lambda: matrix @ q.T,
        "product, row threads": split,
        "encode alone": encode,
        "encode right after a read of the matrix (read included)": read_then_encode,
        "the service's recall op": lambda: service.recall(PROMPT, NOW, None),
        "the service's recall op, a new prompt each time": lambda: service.recall(
            f"{PROMPT}（第 {next(fresh)} 版）", NOW, None
        ),
    }
    samples: dict[str, list[float]] = {name: [] for name in rows}
    for name, f in rows.items():
        f()
        for _ in range(runs):
            started = time.perf_counter()
            f()
            samples[name].append((time.perf_counter() - started) * 1000)
    service.close()
    return {name: statistics.median(v) for name, v in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,100000")
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    work = Path(tempfile.mkdtemp(prefix="memself-bench-scan-"))
    os.environ.setdefault("MEMSELF_MODEL_CACHE", str(REPO_ROOT / ".cache" / "models"))
    try:
        results = {}
        for size in sizes:
            home, _ = prepare(size, "synthetic", work)
            os.environ["MEMSELF_HOME"] = str(home)
            results[size] = measure(home, args.runs)
        names = list(next(iter(results.values())))
        print(f"medians of {args.runs} runs, ms; load average {os.getloadavg()[0]:.2f}\n")
        print("| what | " + " | ".join(f"{s:,}" for s in sizes) + " |")
        print("|---|" + "---:|" * len(sizes))
        for name in names:
            print(f"| {name} | " + " | ".join(f"{results[s][name]:.1f}" for s in sizes) + " |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
