"""Benchmark: an engine meeting a large store with no vectors (first start, model change, a store
brought over from the original), on the real offline model.

    .venv/bin/python bench/bench_backlog.py [--count 30000] [--prompts 20]

Writes ``--count`` distinct synthetic project facts into a temporary data directory (no index),
starts a real engine process (``python -m memself.warm serve``) and measures:

- ready: from spawning the engine until its ping says ready (model loaded, the store read, the
  encoded memories served);
- fully searchable: until ``status`` reports no backlog and every memory indexed;
- the prompt hook (``hooks/entry.py`` as a host runs it) right after ready, during the backlog
  and after it, wall time per run, and whether it recalled the prompt's own fact (the memory
  added last, longer than every other: found at once only when the newest text is encoded
  first).

The model cache is ``$MEMSELF_MODEL_CACHE`` or ``<repo>/.cache/models``. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from memself.engine.client import engine_status, stop_engine  # noqa: E402
from memself.paths import DataPaths  # noqa: E402
from tests.support.backlog_helpers import record  # noqa: E402

ENTRY = REPO / "hooks" / "entry.py"
SERVICES = ["支付", "订单", "库存", "用户中心", "消息推送", "风控", "结算", "搜索", "推荐", "网关"]
THINGS = ["灰度开关", "超时时间", "重试次数", "连接池", "缓存过期时间", "限流阈值", "日志级别", "告警阈值"]
PLACES = ["配置中心", "环境变量", "部署脚本", "Helm values", "README", "运维手册"]
# A prompt about one fact, the memory added last and longer than the synthetic ones.
PROMPT = "支付页新流程的灰度开关叫什么"
FACT = (
    "支付页新流程的灰度开关是 pay_new_flow，放在配置中心支付分组下，上线前先在预发环境打开，"
    "观察半小时订单成功率没有下降再全量，回滚时直接关掉这个开关即可"
)
FACT_STAMP = "2026-11-20T09:30:00.000Z"


def synthetic_facts(count: int) -> list[str]:
    """``count`` distinct facts of varied wording and length."""
    out = []
    for i in range(count):
        service = SERVICES[i % len(SERVICES)]
        thing = THINGS[(i // len(SERVICES)) % len(THINGS)]
        place = PLACES[(i // 7) % len(PLACES)]
        tail = "，改动前要在群里通知值班同学" * (i % 3)
        out.append(f"{service}服务第 {i} 号集群的{thing}写在{place}里，当前取值 {i % 97}{tail}")
    return out


def write_store(paths: DataPaths, texts: list[str]) -> None:
    paths.ensure()
    with open(paths.group_file("project"), "w", encoding="utf-8") as handle:
        for i, text in enumerate(texts):
            handle.write(json.dumps(record(f"bench{i:06d}", text), ensure_ascii=False) + "\n")
        handle.write(json.dumps(record("fact", FACT, FACT_STAMP), ensure_ascii=False) + "\n")
    (paths.root / "config.json").write_text(json.dumps({"model": "multilingual-e5-small"}), "utf-8")


def hook_once(env: dict[str, str], cwd: Path) -> tuple[float, str]:
    payload = {
        "hook_event_name": "UserPromptSubmit",
        "session_id": "bench",
        "prompt": PROMPT,
        "cwd": str(cwd),
    }
    began = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-I", "-S", str(ENTRY), "--agent", "claude"],
        input=json.dumps(payload).encode(),
        capture_output=True,
        env=env,
        timeout=60,
    )
    return time.perf_counter() - began, done.stdout.decode("utf-8", "replace")


def start_engine(
    paths: DataPaths, root: Path, env: dict[str, str], home: Path
) -> tuple[subprocess.Popen[bytes], float, float, str]:
    """An engine on ``root``, timed from spawn to ready, and the first prompt hook after it."""
    began = time.perf_counter()
    engine = subprocess.Popen(
        [sys.executable, "-m", "memself.warm", "serve", "--data-dir", str(root), "--idle-minutes", "9"],
        env=env,
        cwd=str(REPO),
    )
    status = None
    while not (status and status.get("ready")):
        time.sleep(0.02)
        status = engine_status(paths, 1.0)
    ready = time.perf_counter() - began
    first_took, first_out = hook_once(env, home)
    return engine, ready, first_took, first_out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=30000)
    parser.add_argument("--prompts", type=int, default=20)
    parser.add_argument(
        "--starts", type=int, default=1, help="engine starts on the unencoded store (index removed between)"
    )
    args = parser.parse_args()
    cache = os.environ.get("MEMSELF_MODEL_CACHE") or str(REPO / ".cache" / "models")
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        root = home / ".memory-self-evolution"
        env = {**os.environ, "HOME": str(home), "MEMSELF_MODEL_CACHE": cache, "MEMSELF_JUDGE": "off"}
        env.pop("MEMSELF_ENGINE_SERVICE", None)
        os.environ.update({"HOME": str(home), "MEMSELF_MODEL_CACHE": cache})
        paths = DataPaths(root)
        write_store(paths, synthetic_facts(args.count - 1))
        starts: list[tuple[float, float, bool]] = []  # ready s, first prompt s, fact recalled
        for _ in range(args.starts - 1):
            engine, ready, first_took, first_out = start_engine(paths, root, env, home)
            stop_engine(paths)
            engine.wait(30)
            shutil.rmtree(paths.index_dir, ignore_errors=True)
            starts.append((ready, first_took, "pay_new_flow" in first_out))
        began = time.perf_counter()
        engine, ready, first_took, first_out = start_engine(paths, root, env, home)
        starts.append((ready, first_took, "pay_new_flow" in first_out))
        try:
            during: list[float] = []
            found_during = 0
            progress: list[str] = []
            while True:
                status = engine_status(paths, 5.0) or {}
                service = status.get("service") or {}
                backlog = service.get("backlog")
                if backlog is None and not service.get("busy") and service.get("indexed") == args.count:
                    break
                if backlog and len(progress) < 3:
                    progress.append(f"{backlog['done']}/{backlog['total']} at {backlog['rate_per_s']}/s")
                if len(during) < args.prompts:
                    took, out = hook_once(env, home)
                    during.append(took)
                    found_during += "pay_new_flow" in out
                time.sleep(0.5)
            searchable = time.perf_counter() - began
            after = []
            found_after = 0
            for _ in range(args.prompts):
                took, out = hook_once(env, home)
                after.append(took)
                found_after += "pay_new_flow" in out
        finally:
            stop_engine(paths)
            engine.wait(30)

    def ms(values: list[float]) -> str:
        if not values:
            return "-"
        return f"{statistics.median(values) * 1000:.0f} ms (max {max(values) * 1000:.0f})"

    print(f"| {args.count} unencoded memories, multilingual-e5-small, {os.cpu_count()} cores | |")
    print("|---|---|")
    readies = sorted(r for r, _, _ in starts)
    firsts = sorted(f for _, f, _ in starts)
    spread = f" ({readies[0]:.2f}-{readies[-1]:.2f}, {len(starts)} starts)" if len(starts) > 1 else ""
    print(f"| engine ready | {statistics.median(readies):.2f} s{spread} |")
    print(f"| first prompt after ready, median | {statistics.median(firsts) * 1000:.0f} ms |")
    print(f"| the fact recalled on the first prompt | {sum(f for _, _, f in starts)} of {len(starts)} |")
    print(f"| fully searchable | {searchable:.1f} s ({args.count / max(searchable - ready, 1e-9):.0f}/s) |")
    print(f"| prompt hook during the backlog (median, {len(during)} runs) | {ms(during)} |")
    print(f"| the prompt's fact recalled during the backlog | {found_during}/{len(during)} |")
    print(f"| prompt hook after it (median, {len(after)} runs) | {ms(after)} |")
    print(f"| the prompt's fact recalled after it | {found_after}/{len(after)} |")
    print(f"| progress seen | {'; '.join(progress)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
