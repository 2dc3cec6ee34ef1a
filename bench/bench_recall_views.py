"""Benchmark: the prompt recall op with appliesWhen views, beside the scoring it replaced.

    .venv/bin/python bench/bench_recall_views.py [--memories 1000] [--views 3] [--prompts 200]

With the real offline model (multilingual-e5-small, lean runtime) and a temporary data directory:
``--memories`` synthetic memories (half rules, half project facts), each with ``--views``
appliesWhen requests, indexed through ``VectorIndex.sync`` as the engine does (the time to encode
the index is the first table). Then ``Recaller.recall`` over the index, as the engine's recall op
calls it (prompt encoding, scoring, gate), for:

- the previous scoring (the calibration knobs before this change: 8 principal directions, each
  sentence of a prompt scored, no general-question detector, no views) over the memories alone;
- the shipped scoring over the memories without their requests;
- the shipped scoring over the memories with their requests (views).

Rows are interleaved prompt by prompt so that load drifts hit every row alike; a second table
gives the same with the prompt's vectors looked up (scoring and gate only). Prints markdown.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

from memself.index.sync import VectorIndex  # noqa: E402
from memself.model.catalog import OFFLINE_MODEL, resolve_model  # noqa: E402
from memself.model.encoder import load_encoder  # noqa: E402
from memself.recall.background import load_space  # noqa: E402
from memself.recall.gate import GateParams, default_floors  # noqa: E402
from memself.recall.memory_side import memory_side  # noqa: E402
from memself.recall.pool import indexed_pool  # noqa: E402
from memself.recall.scoring import Recaller, ScoringSettings, query_views  # noqa: E402
from memself.store.records import Memory  # noqa: E402

NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)
TOPICS = ["支付", "订单", "物流", "司机端", "网关", "缓存", "数据库", "监控", "发布", "权限", "日志", "测试"]
ACTIONS = ["统一使用", "不要直接修改", "上线前要检查", "默认开启", "由平台组维护", "需要评审"]
REQUESTS = ["帮我改下{t}的 flag_{i} 配置", "{t}这块上线前要看啥", "给{t}加个开关 flag_{i}", "{t}的负责人是谁"]
PROMPTS = [
    "帮我看一下这个函数为什么返回空",
    "把日志级别调成 debug 再跑一次",
    "这个接口加一个按时间范围过滤的参数，默认最近七天",
    "重构一下这个模块，把数据库访问和业务逻辑分开，顺便补上单元测试",
    "为什么本地能跑，放到容器里就连不上数据库了？报错是 connection refused",
    "写个脚本把旧表的数据迁到新表，注意字段名变了，时间要转成 UTC",
    "支付模块的灰度开关配置在哪里",
    "优化一下这个查询，现在要跑十几秒，表里大概有两千万行，已经有 created_at 的索引",
    "前端这个列表滚动的时候很卡，帮我看看是不是重复渲染了",
    "给这个命令行工具加一个 --dry-run 选项，只打印要做的事情不真正执行",
    "这次提交信息帮我写一下",
    "把这个同步的 HTTP 调用改成异步并发，最多同时十个请求，失败重试三次",
]
# The knobs the calibration file had before this change.
PREVIOUS = {"space_dims": 8, "sentence_views": True, "general": None, "applies_when": False}


def synthetic(count: int, views: int) -> list[Memory]:
    out = []
    for i in range(count):
        topic, action = TOPICS[i % len(TOPICS)], ACTIONS[(i // len(TOPICS)) % len(ACTIONS)]
        text = f"{topic}模块第 {i} 项约定：{action} flag_{i} 配置，负责人见 wiki 第 {i % 97} 页。"
        m = Memory.create(text, "rule" if i % 2 else "project", NOW)
        m.id = f"mem-bench-{i:05d}"
        m.appliesWhen = tuple(REQUESTS[k % len(REQUESTS)].format(t=topic, i=i) for k in range(views))
        out.append(m)
    return out


class CachedQueries:
    """The encoder with every prompt view encoded once: the scoring-only table."""

    def __init__(self, inner: object, texts: list[str]) -> None:
        self.inner, self.model_id, self.dim = inner, inner.model_id, inner.dim  # type: ignore[attr-defined]
        self.cache = {t: v for t, v in zip(texts, inner.encode_queries(texts), strict=True)}  # type: ignore[attr-defined]

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return np.stack([self.cache[t] for t in texts])

    def encode_passages(self, texts: list[str]) -> np.ndarray:
        return self.inner.encode_passages(texts)  # type: ignore[attr-defined]


def pct(samples: list[float]) -> str:
    s = sorted(samples)
    return f"{statistics.median(s):.2f} / {s[min(len(s) - 1, int(0.95 * len(s)))]:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--memories", type=int, default=1000)
    ap.add_argument("--views", type=int, default=3)
    ap.add_argument("--prompts", type=int, default=200)
    args = ap.parse_args()
    encoder = load_encoder(OFFLINE_MODEL)
    shipped = ScoringSettings.from_model(resolve_model(OFFLINE_MODEL))
    previous = replace(shipped, **PREVIOUS)  # type: ignore[arg-type]
    params = GateParams(default_floors(resolve_model(OFFLINE_MODEL)), -1.0, 3)
    with_views = synthetic(args.memories, args.views)
    without = [replace(m, appliesWhen=()) for m in with_views]
    with tempfile.TemporaryDirectory() as tmp:
        index = VectorIndex.load(Path(tmp) / "index")
        side = memory_side(encoder)
        started = time.perf_counter()
        index.sync(without, side)
        text_s = time.perf_counter() - started
        started = time.perf_counter()
        index.sync(with_views, side)
        views_s = time.perf_counter() - started
        print(
            f"Index: {args.memories} memories encoded in {text_s:.1f} s; their {args.memories * args.views}"
        )
        print(f"appliesWhen requests added in {views_s:.1f} s ({len(index)} rows).\n")
        pools = {"plain": indexed_pool(without, index), "views": indexed_pool(with_views, index)}
        prompts = [
            PROMPTS[i % len(PROMPTS)] + ("" if i < len(PROMPTS) else f" #{i}") for i in range(args.prompts)
        ]
        every_view = sorted({v for p in prompts for s in (True, False) for v in query_views(p, s)})
        for label, enc in (("recall op (prompt encoded)", encoder), ("scoring and gate only", None)):
            enc = enc or CachedQueries(encoder, every_view)
            recallers = {
                "previous scoring, 1k memories": (
                    Recaller(enc, load_space(encoder, 8, True), previous),  # type: ignore[arg-type]
                    pools["plain"],
                ),
                "shipped, memories without requests": (
                    Recaller(enc, load_space(encoder, shipped.space_dims, True), shipped),  # type: ignore[arg-type]
                    pools["plain"],
                ),
                f"shipped, each memory with {args.views} requests": (
                    Recaller(enc, load_space(encoder, shipped.space_dims, True), shipped),  # type: ignore[arg-type]
                    pools["views"],
                ),
            }
            times: dict[str, list[float]] = {k: [] for k in recallers}
            for prompt in prompts[:5]:  # warm: pools, norms, lexical postings
                for rec, pool in recallers.values():
                    rec.recall(prompt, pool, index.matrix, params, matrix_key=index.generation)
            for prompt in prompts:
                for name, (rec, pool) in recallers.items():
                    t = time.perf_counter()
                    rec.recall(prompt, pool, index.matrix, params, matrix_key=index.generation)
                    times[name].append((time.perf_counter() - t) * 1000)
            print(f"{label}, {args.prompts} prompts, p50 / p95 ms:\n")
            print("| scoring | p50 / p95 ms |")
            print("|---|---:|")
            for name, samples in times.items():
                print(f"| {name} | {pct(samples)} |")
            print()


if __name__ == "__main__":
    main()
