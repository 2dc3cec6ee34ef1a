"""Benchmark: encode latency, vector index load time, scoring time as recall scores, peak memory.

    .venv/bin/python bench/bench_encode.py [--sizes 1000,10000,100000] [--model multilingual-e5-small]

Encoding uses the real model (the offline one by default, expanded into $MEMSELF_MODEL_CACHE or
<repo>/.cache/models). The index sizes use random unit vectors of the model's dimension written
through VectorIndex.sync (encoding 100k real texts would take an hour and measure nothing new).
Scoring is ``Recaller.dense_scores`` over the index matrix with the generation as its key, as the
engine calls it, in a recall space with the model's calibrated number of principal directions;
the prompt's vector is looked up, not encoded (encoding is the first table). Prints markdown
tables.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

if __name__ == "__main__" and "--blas-threads" in sys.argv:
    # OpenBLAS reads this once, at numpy import; oversubscribed cores make threaded gemv slower.
    os.environ["OPENBLAS_NUM_THREADS"] = sys.argv[sys.argv.index("--blas-threads") + 1]

import numpy as np  # noqa: E402

from memself.index.sync import VectorIndex  # noqa: E402
from memself.recall.background import build_space  # noqa: E402
from memself.recall.scoring import Recaller, ScoringSettings  # noqa: E402

# Generic prompts of varied length written for this benchmark (not the eval cases).
PROMPTS = [
    "帮我看一下这个函数为什么返回空",
    "把日志级别调成 debug 再跑一次",
    "这个接口加一个按时间范围过滤的参数，默认最近七天",
    "重构一下这个模块，把数据库访问和业务逻辑分开，顺便补上单元测试",
    "为什么本地能跑，放到容器里就连不上数据库了？报错是 connection refused",
    "写个脚本把旧表的数据迁到新表，注意字段名变了，时间要转成 UTC",
    "解释一下这个正则",
    "优化一下这个查询，现在要跑十几秒，表里大概有两千万行，已经有 created_at 的索引",
    "前端这个列表滚动的时候很卡，帮我看看是不是重复渲染了",
    "给这个命令行工具加一个 --dry-run 选项，只打印要做的事情不真正执行",
    "这次提交信息帮我写一下",
    "把这个同步的 HTTP 调用改成异步并发，最多同时十个请求，失败重试三次",
]


@dataclass
class RandomEncoder:
    model_id: str
    dim: int
    seed: int = 0

    def encode_passages(self, texts):
        rng = np.random.default_rng(self.seed + len(texts) * 7919 + hash(texts[0]) % 1000)
        v = rng.normal(size=(len(texts), self.dim)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    encode_queries = encode_passages


@dataclass
class LookupEncoder:
    """Prompt vectors computed beforehand: scoring is timed without the encoder."""

    model_id: str
    dim: int
    vectors: dict[str, np.ndarray]

    def encode_queries(self, texts):
        return np.stack([self.vectors[t] for t in texts])

    encode_passages = encode_queries


@dataclass
class Mem:
    id: str
    text: str


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def rss_mb() -> float:
    """Peak RSS of this process so far."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def current_rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def bench_encoder(model: str, cache: Path) -> tuple[object, list[str]]:
    t0 = time.perf_counter()
    from memself.model.encoder import load_encoder

    encoder = load_encoder(model, cache)
    load_s = time.perf_counter() - t0
    loaded_rss = current_rss_mb()
    for p in PROMPTS[:3]:
        encoder.encode_queries([p])  # warm-up
    single: list[float] = []
    for _ in range(4):
        for p in PROMPTS:
            t = time.perf_counter()
            encoder.encode_queries([p])
            single.append(time.perf_counter() - t)
    batch_t = time.perf_counter()
    encoder.encode_passages(PROMPTS * 4)
    per_batched = (time.perf_counter() - batch_t) / (len(PROMPTS) * 4)
    rows = [
        "| model | threads | load (import + model) | encode 1 prompt p50 | p95 "
        "| batched, per text | RSS after load | peak RSS |",
        "|---|---|---|---|---|---|---|---|",
        f"| {encoder.model_id} | {getattr(encoder, 'threads', '?')} | {load_s:.1f} s | "
        f"{ms(statistics.median(single))} ms | {ms(pct(single, 95))} ms | {ms(per_batched)} ms | "
        f"{loaded_rss:.0f} MB | {rss_mb():.0f} MB |",
    ]
    return encoder, rows


def bench_index(sizes: list[int], dim: int, model_id: str) -> list[str]:
    rows = [
        "| memories | files on disk | load (mmap) | load (one read) | projected matmul p50 / p95 "
        "| Recaller.dense_scores p50 / p95 (first) | no-op sync | write (sync +1) | RSS growth, "
        "loaded + scored |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    rng = np.random.default_rng(42)
    for n in sizes:
        with tempfile.TemporaryDirectory(prefix="memself-bench-") as tmp:
            directory = Path(tmp) / "index"
            memories = [Mem(f"mem-{i:07d}-bench", f"记忆 {i}") for i in range(n)]
            encoder = RandomEncoder(model_id, dim)
            VectorIndex.load(directory).sync(memories, encoder)
            size_mb = sum(p.stat().st_size for p in directory.iterdir() if p.is_file()) / 1e6

            loads_mmap, loads_read = [], []
            for _ in range(7):
                t = time.perf_counter()
                idx = VectorIndex.load(directory, mmap=True)
                _ = idx.ids
                loads_mmap.append(time.perf_counter() - t)
                t = time.perf_counter()
                idx_read = VectorIndex.load(directory, mmap=False)
                _ = idx_read.ids
                loads_read.append(time.perf_counter() - t)

            # An anisotropic background (a shared direction plus noise), as real sentences are.
            shared = encoder.encode_passages(["bg"])[0]
            sentences = rng.normal(size=(200, dim)).astype(np.float32) * 0.05 + shared * 0.8
            scoring = ScoringSettings.for_model_id(model_id)
            space = build_space(model_id, sentences, scoring.space_dims)
            prompts = [f"q{i}" for i in range(40)]
            vectors = dict(zip(prompts, encoder.encode_passages(prompts), strict=True))
            recaller = Recaller(LookupEncoder(model_id, dim, vectors), space, scoring)

            # The same scores computed the plain way: the whole matrix projected once, then one
            # product per prompt (what dense_scores avoids holding in memory).
            projected = space.project(np.asarray(idx_read.matrix))
            plain = []
            for prompt in prompts:
                t = time.perf_counter()
                q = space.project(vectors[prompt])[0]
                scores = projected @ q
                int(np.argmax(scores))
                plain.append(time.perf_counter() - t)
            del projected

            del idx_read
            rss0 = current_rss_mb()
            idx = VectorIndex.load(directory, mmap=True)
            t = time.perf_counter()
            recaller.dense_scores(prompts[0], idx.matrix, matrix_key=idx.generation)
            first = time.perf_counter() - t
            via_index = []
            for prompt in prompts:
                t = time.perf_counter()
                s = recaller.dense_scores(prompt, idx.matrix, matrix_key=idx.generation)
                int(np.argmax(s))
                via_index.append(time.perf_counter() - t)

            grown = current_rss_mb() - rss0
            t = time.perf_counter()
            idx.sync(memories, encoder)
            noop = time.perf_counter() - t
            t = time.perf_counter()
            idx.sync([*memories, Mem("mem-new", "新记忆")], encoder)
            write = time.perf_counter() - t
            rows.append(
                f"| {n:,} | {size_mb:.0f} MB | {ms(statistics.median(loads_mmap))} ms | "
                f"{ms(statistics.median(loads_read))} ms | {ms(statistics.median(plain))} / "
                f"{ms(pct(plain, 95))} ms | {ms(statistics.median(via_index))} / "
                f"{ms(pct(via_index, 95))} ms ({ms(first)}) | {ms(noop)} ms | {ms(write)} ms | "
                f"{grown:.0f} MB |"
            )
            print(f"  done {n:,}; peak RSS so far {rss_mb():.0f} MB", file=sys.stderr)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--model", default="multilingual-e5-small")
    parser.add_argument("--no-model", action="store_true", help="index only (dimension 384)")
    parser.add_argument("--blas-threads", help="set OPENBLAS_NUM_THREADS for this run")
    args = parser.parse_args()
    cache = Path(os.environ.get("MEMSELF_MODEL_CACHE") or REPO / ".cache" / "models")
    sizes = [int(s) for s in args.sizes.split(",") if s]
    print(
        f"machine: {os.cpu_count()} CPUs, numpy {np.__version__}, OPENBLAS_NUM_THREADS="
        f"{os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}, load average "
        f"{os.getloadavg()[0]:.1f}\n"
    )
    dim, model_id = 384, args.model
    if not args.no_model:
        encoder, rows = bench_encoder(args.model, cache)
        dim, model_id = encoder.dim, encoder.model_id
        print("\n".join(rows) + "\n")
    rss_before = rss_mb()
    print("\n".join(bench_index(sizes, dim, model_id)))
    print(
        f"\npeak RSS: {rss_before:.0f} MB after the model, {rss_mb():.0f} MB at the end "
        f"(the 100k index holds {100_000 * dim * 4 / 1e6:.0f} MB of float32 vectors)"
    )


if __name__ == "__main__":
    main()
