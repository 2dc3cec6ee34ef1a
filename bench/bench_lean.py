"""Benchmark: the lean model runtime side by side with the torch path it replaced.

    .venv/bin/python bench/bench_lean.py [--runs 10] [--old-runs 3] [--old-tree /path/to/old/checkout]

Rows (medians, with the spread where it matters; markdown tables on stdout):

- engine start to ready: process exec to the engine's ``engine-ready`` log line, 1k memories
  (500 rules, 500 project facts) already indexed: e5-small (the offline model) and a
  bge-base-zh-shaped random BERT (12 layers, 768 hidden, 21128-piece WordPiece: built here
  with ``tests/support/bge_shaped.py``), on the lean runtime; and, for reference, e5-small on the torch
  path of an older checkout (``--old-tree``: a checkout from before this runtime, with its own
  ``.venv``). Runs are interleaved so load drifts hit every row alike.
- engine RSS at ready and after 50 prompts (``recall`` ops through the engine's own client).
- warm encode of one prompt (p50 / p95) and batch encode per text, in a fresh process per model.
- dynamic int8 quantisation of the graph: speed and the lowest cosine to float32 over the probes
  (measured, not shipped: the calibrated thresholds would need recalibration).

Models are prepared into ``$MEMSELF_MODEL_CACHE`` (default ``<repo>/.cache/models``) the first
time; the bge-shaped folder is kept in ``<repo>/.cache/bench``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PROMPTS = [
    "帮我看一下这个函数为什么返回空",
    "支付模块的灰度开关配置在哪里，上线前要检查什么",
    "为什么本地能跑，放到容器里就连不上数据库了？报错是 connection refused",
    "给这个命令行工具加一个 --dry-run 选项，只打印要做的事情不真正执行",
    "优化一下这个查询，现在要跑十几秒，表里大概有两千万行，已经有 created_at 的索引",
    "这次提交信息帮我写一下",
]


# --------------------------------------------------------------------------- workers (any checkout)


def rss_fields(pid: int | str = "self") -> dict[str, float]:
    out = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            key = line.split(":")[0]
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                out[key] = int(line.split()[1]) / 1024
    return out


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def encode_worker(model: str, cache: str, int8: bool) -> dict[str, Any]:
    """Runs in a fresh interpreter of either checkout: load, one-prompt and batch timings."""
    t0 = time.perf_counter()
    from memself.model.encoder import load_encoder

    encoder = load_encoder(model, Path(cache))
    enable = getattr(encoder, "enable_fast_single", None)
    if callable(enable):  # the torch path's engine turned its compiled prompt path on
        enable()
    load_s = time.perf_counter() - t0
    loaded = rss_fields()
    for p in PROMPTS:
        encoder.encode_queries([p])
    single = []
    for _ in range(8):
        for p in PROMPTS:
            t = time.perf_counter()
            encoder.encode_queries([p])
            single.append(time.perf_counter() - t)
    texts = [
        f"{PROMPTS[i % len(PROMPTS)]}（第 {i} 条记忆，" + "补充说明。" * (i % 7) + "）" for i in range(256)
    ]
    t = time.perf_counter()
    encoder.encode_passages(texts)
    per_text = (time.perf_counter() - t) / len(texts)
    result = {
        "load_s": load_s,
        "rss_loaded": loaded,
        "single_p50": statistics.median(single),
        "single_p95": pct(single, 95),
        "batch_per_text": per_text,
        "rss_after": rss_fields(),
        "heavy": [m for m in ("torch", "sentence_transformers") if m in sys.modules],
    }
    if int8:
        result["int8"] = int8_worker(encoder)
    return result


def int8_worker(encoder: Any) -> dict[str, Any]:
    """Dynamic int8 quantisation of the prepared graph, against the float32 one on the probes."""
    import numpy as np
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from memself.model.cache import Prepared
    from memself.model.probes import PROBES
    from memself.model.runtime import LeanEncoder

    prepared = encoder.prepared
    with tempfile.TemporaryDirectory(prefix="memself-int8-") as tmp:
        folder = Path(tmp)
        for name in prepared.manifest["files"]:
            if name != "model.onnx":
                (folder / name).symlink_to(prepared.folder / name)
        t = time.perf_counter()
        quantize_dynamic(
            str(prepared.folder / "model.onnx"), str(folder / "model.onnx"), weight_type=QuantType.QInt8
        )
        quantise_s = time.perf_counter() - t
        size = (folder / "model.onnx").stat().st_size
        q = LeanEncoder(Prepared(folder, prepared.manifest), encoder.settings, encoder.threads)
        texts = [encoder.settings.query_prefix + p for p in PROBES]
        cos = (q.encode_raw(texts) * encoder.encode_raw(texts)).sum(axis=1)
        fp32, int8 = [], []
        for _ in range(8):
            for p in PROMPTS:  # interleaved so both see the same load
                for enc, out in ((encoder, fp32), (q, int8)):
                    t = time.perf_counter()
                    enc.encode_queries([p])
                    out.append(time.perf_counter() - t)
    return {
        "quantise_s": quantise_s,
        "graph_mb": size / 1e6,
        "min_cosine": float(np.min(cos)),
        "fp32_p50": statistics.median(fp32),
        "int8_p50": statistics.median(int8),
        "fp32_p95": pct(fp32, 95),
        "int8_p95": pct(int8, 95),
    }


def prompts_worker(data_dir: str, count: int) -> dict[str, Any]:
    """Runs in either checkout: ``count`` recall ops through that checkout's engine client."""
    from memself.engine.client import call_engine
    from memself.paths import DataPaths

    paths = DataPaths(Path(data_dir))
    times = []
    for i in range(count):
        now = datetime.now(timezone.utc).isoformat()
        t = time.perf_counter()
        call_engine(
            paths, "recall", {"text": PROMPTS[i % len(PROMPTS)] + f" #{i}", "now": now}, timeout_s=120
        )
        times.append(time.perf_counter() - t)
    return {"p50": statistics.median(times), "p95": pct(times, 95)}


# --------------------------------------------------------------------------- orchestration


class Setup:
    def __init__(self, name: str, python: str, tree: Path, data: Path, env: dict[str, str]) -> None:
        self.name, self.python, self.tree, self.data, self.env = name, python, tree, data, env
        self.starts: list[float] = []
        self.rss_ready: list[dict[str, float]] = []
        self.rss_prompts: dict[str, float] = {}
        self.prompt_times: dict[str, float] = {}

    def run_worker(self, *args: str) -> dict[str, Any]:
        proc = subprocess.run(
            [self.python, str(Path(__file__).resolve()), "--worker", *args],
            capture_output=True,
            text=True,
            env=self.env,
            cwd=self.tree,
            timeout=1800,
            check=False,
        )
        if proc.returncode != 0:
            raise SystemExit(f"{self.name}: worker failed: {proc.stderr[-2000:]}")
        return json.loads(proc.stdout.strip().splitlines()[-1])

    def start_engine(self) -> tuple[subprocess.Popen[bytes], float]:
        log = self.data / "memself.log"
        offset = log.stat().st_size if log.exists() else 0
        started = time.perf_counter()
        proc = subprocess.Popen(
            [
                self.python,
                "-m",
                "memself.warm",
                "serve",
                "--data-dir",
                str(self.data),
                "--idle-minutes",
                "30",
            ],
            cwd=self.tree,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        while True:
            text = log.read_text(encoding="utf-8", errors="replace")[offset:] if log.exists() else ""
            if "engine-ready" in text:
                return proc, time.perf_counter() - started
            if "engine-warm-up-failed" in text or proc.poll() is not None:
                stop(proc)
                raise SystemExit(f"{self.name}: engine did not start: {text[-1500:]}")
            if time.perf_counter() - started > 600:
                stop(proc)
                raise SystemExit(f"{self.name}: engine not ready in 600 s")
            time.sleep(0.01)


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def make_data(root: Path, model: str, env: dict[str, str]) -> Path:
    sys.path.insert(0, str(REPO / "bench"))
    from bench_hooks import synthetic_memories, write_group

    from memself.config import set_config_value
    from memself.paths import DataPaths

    root.mkdir(parents=True, mode=0o700)
    write_group(root, "rule", synthetic_memories(500, "rule"))
    write_group(root, "project", synthetic_memories(500, "project"))
    set_config_value(DataPaths(root), "model", model)
    return root


def bge_shaped(cache: Path) -> Path:
    folder = REPO / ".cache" / "bench" / "bge-base-shaped"
    if not (folder / "st" / "modules.json").is_file():
        print("building the bge-base-shaped model (12 layers, 768 hidden, 21128 pieces)…", file=sys.stderr)
        from tests.support.bge_shaped import BASE, build

        build(folder, BASE)
    return folder / "st"


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        kind, *rest = sys.argv[2:]
        if kind == "encode":
            print(json.dumps(encode_worker(rest[0], rest[1], rest[2] == "int8")))
        else:
            print(json.dumps(prompts_worker(rest[0], int(rest[1]))))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--old-runs", type=int, default=3)
    ap.add_argument(
        "--old-tree",
        type=Path,
        default=None,
        help="a checkout of the torch path with its own .venv (row skipped if absent)",
    )
    ap.add_argument("--prompts", type=int, default=50)
    args = ap.parse_args()
    sys.path.insert(0, str(REPO))
    from memself.model.prepare import prepare

    cache = Path(os.environ.get("MEMSELF_MODEL_CACHE", REPO / ".cache" / "models"))
    bge = bge_shaped(cache)
    for model in ("multilingual-e5-small", str(bge)):
        prepare(model, cache)
    work = Path(tempfile.mkdtemp(prefix="memself-bench-lean-"))
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSELF_")}
    base_env.update(MEMSELF_MODEL_CACHE=str(cache), HOME=str(work), HF_HUB_OFFLINE="1")
    python = sys.executable
    setups = [
        Setup(
            "e5-small, lean",
            python,
            REPO,
            make_data(work / "e5", "multilingual-e5-small", base_env),
            base_env,
        ),
        Setup("bge-base-shaped, lean", python, REPO, make_data(work / "bge", str(bge), base_env), base_env),
    ]
    old = args.old_tree
    if old is not None and (old / ".venv" / "bin" / "python").exists():
        setups.append(
            Setup(
                "e5-small, torch path (old)",
                str(old / ".venv" / "bin" / "python"),
                old,
                make_data(work / "old", "multilingual-e5-small", base_env),
                base_env,
            )
        )
    for s in setups:
        s.env = {**s.env, "MEMSELF_HOME": str(s.data)}
        # The first start encodes the 1k memories into the index; the timed starts find it built.
        proc, first = s.start_engine()
        s.prompt_times = s.run_worker("prompts", str(s.data), "1")
        stop(proc)
        print(f"{s.name}: first start (index of 1k memories built) {first:.1f} s", file=sys.stderr)
    for i in range(max(args.runs, args.old_runs)):
        for s in setups:
            if i >= (args.old_runs if "old" in s.name else args.runs):
                continue
            proc, seconds = s.start_engine()
            s.starts.append(seconds)
            s.rss_ready.append(rss_fields(proc.pid))
            if i == 0:
                s.prompt_times = s.run_worker("prompts", str(s.data), str(args.prompts))
                s.rss_prompts = rss_fields(proc.pid)
            stop(proc)
            print(f"{s.name}: start {seconds:.2f} s", file=sys.stderr)
    encodes = {
        s.name: s.run_worker(
            "encode",
            "multilingual-e5-small" if "e5" in s.name else str(bge),
            str(cache),
            "int8" if "lean" in s.name else "",
        )
        for s in setups
    }

    print(
        f"\n### Engine start and memory ({args.runs} runs each, {args.old_runs} for the torch path; "
        f"1k memories indexed)\n"
    )
    print(
        "| engine | start to ready, median (min-max) | RSS at ready | RSS after "
        f"{args.prompts} prompts (anon + file) | prompt recall op p50 / p95 |"
    )
    print("|---|---|---|---|---|")
    for s in setups:
        rss = statistics.median(r["VmRSS"] for r in s.rss_ready)
        after = s.rss_prompts
        print(
            f"| {s.name} | {statistics.median(s.starts):.2f} s ({min(s.starts):.2f}-{max(s.starts):.2f}) "
            f"| {rss:.0f} MB | {after['VmRSS']:.0f} MB ({after['RssAnon']:.0f} + {after['RssFile']:.0f}) "
            f"| {ms(s.prompt_times['p50'])} / {ms(s.prompt_times['p95'])} |"
        )
    print("\n### Encoding in one process (fresh interpreter per model)\n")
    print(
        "| model | load | one prompt p50 / p95 | batch of 256, per text | RSS after load "
        "| RSS after batch | torch imported |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, e in encodes.items():
        print(
            f"| {name} | {e['load_s']:.2f} s | {ms(e['single_p50'])} / {ms(e['single_p95'])} "
            f"| {ms(e['batch_per_text'])} | {e['rss_loaded']['VmRSS']:.0f} MB "
            f"| {e['rss_after']['VmRSS']:.0f} MB | {'yes' if e['heavy'] else 'no'} |"
        )
    print("\n### Dynamic int8 quantisation of the graph (measured only, not shipped)\n")
    print(
        "| model | graph fp32 -> int8 | one prompt p50 fp32 / int8 | p95 fp32 / int8 "
        "| lowest cosine int8 vs fp32 (probes) |"
    )
    print("|---|---|---|---|---|")
    for name, e in encodes.items():
        q = e.get("int8")
        if q:
            print(
                f"| {name} | -> {q['graph_mb']:.0f} MB | {ms(q['fp32_p50'])} / {ms(q['int8_p50'])} "
                f"| {ms(q['fp32_p95'])} / {ms(q['int8_p95'])} | {q['min_cosine']:.4f} |"
            )


if __name__ == "__main__":
    main()
