"""End-to-end hook latency: process start to JSON out, as a host runs it.

Rows, interleaved run by run so load drifts hit every row alike (N runs each):
- ``python -c pass`` and ``python -I -S -c pass``: the interpreter floors;
- prompt hook (``UserPromptSubmit``, Claude Code payload) with a warm engine and 1k memories (the
  engine encodes the prompt on the lean runtime: onnxruntime, ``memself.model.runtime``);
- session start with 1k rules, warm engine;
- prompt hook and session start with the engine stopped before every run (cold): the prompt hook
  then starts the engine and waits for it, and the table says how many cold prompts still got
  their recall;
- ``memself recall`` with the engine running (it answers) and with none (computed in process).

    .venv/bin/python bench/bench_hooks.py [--runs 50] [--cold-runs 10]

Uses a temporary data directory with the offline model (multilingual-e5-small) and the shared
model cache (``MEMSELF_MODEL_CACHE``, default ``<repo>/.cache/models``); nothing of the user's.
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
from datetime import datetime, timezone
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
TOPICS = ["支付", "订单", "物流", "司机端", "网关", "缓存", "数据库", "监控", "发布", "权限", "日志", "测试"]
ACTIONS = ["统一使用", "不要直接修改", "上线前要检查", "默认开启", "由平台组维护", "需要评审"]


def synthetic_memories(count: int, group: str) -> list[dict]:
    now = datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")
    out = []
    for i in range(count):
        topic, action = TOPICS[i % len(TOPICS)], ACTIONS[(i // len(TOPICS)) % len(ACTIONS)]
        text = f"{topic}模块第 {i} 项约定：{action} flag_{i} 配置，负责人见 wiki 第 {i % 97} 页。"
        out.append(
            {
                "id": f"mem-bench-{group}-{i:05d}",
                "text": text,
                "confidence": 0.5 + (i % 50) / 100,
                "category": group,
                "evidence": "bench",
                "firstSeen": now,
                "lastSeen": now,
                "deprecated": False,
                "createdAt": now,
            }
        )
    return out


def write_group(home: Path, group: str, records: list[dict]) -> None:
    (home / f"{group}.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8"
    )


FACT = "支付模块的灰度开关配置在配置中心 payment 命名空间，上线前要检查开关默认值"
RECALL_MARK = "## 项目事实"


def timed(args: list[str], stdin: bytes, env: dict, out: list[bytes] | None = None) -> float:
    started = time.perf_counter()
    result = subprocess.run(args, input=stdin, capture_output=True, env=env, check=False)
    elapsed = (time.perf_counter() - started) * 1000
    if result.returncode != 0:
        raise SystemExit(f"{args} exited {result.returncode}: {result.stderr[-500:]!r}")
    if out is not None:
        out.append(result.stdout)
    return elapsed


def memself_cli(env: dict, *args: str) -> str:
    return subprocess.run(
        [sys.executable, "-m", "memself", *args], env=env, capture_output=True, text=True, check=True
    ).stdout


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(ordered), p95


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--cold-runs", type=int, default=10)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="memself-bench-hooks-"))
    home = work / "data"
    home.mkdir(mode=0o700)
    env = {**os.environ, "MEMSELF_HOME": str(home), "HOME": str(work)}
    env.setdefault("MEMSELF_MODEL_CACHE", str(REPO_ROOT / ".cache" / "models"))
    write_group(home, "rule", synthetic_memories(500, "rule"))
    write_group(home, "project", synthetic_memories(499, "project"))
    memself_cli(env, "config", "model", "multilingual-e5-small")
    memself_cli(env, "project", "add", FACT)
    path_envs = {"prompt hook, warm engine, 1k memories": env}
    rules_home = work / "rules-data"
    rules_home.mkdir(mode=0o700)
    rules_env = {**env, "MEMSELF_HOME": str(rules_home)}
    write_group(rules_home, "rule", synthetic_memories(1000, "rule"))
    memself_cli(rules_env, "config", "model", "multilingual-e5-small")

    prompt = json.dumps(
        {
            "hook_event_name": "UserPromptSubmit",
            "session_id": "bench-session",
            "prompt_id": "p1",
            "cwd": str(work),
            "prompt": "支付模块的灰度开关配置在哪里，上线前要检查什么",
        }
    ).encode()
    start = json.dumps(
        {
            "hook_event_name": "SessionStart",
            "session_id": "bench-session",
            "source": "startup",
            "cwd": str(work),
        }
    ).encode()
    from memself.hook.command import hook_command
    from memself.hosts.base import EventKind

    # What setup registers; Claude Code gives session start and prompt the same timeout.
    hook = hook_command("claude", EventKind.PROMPT_SUBMIT)
    rows: dict[str, list[float]] = {
        k: []
        for k in (
            "python -c pass",
            "python -I -S -c pass",
            *path_envs,
            "session start, warm engine, 1k rules",
            "prompt hook, engine cold",
            "session start, engine cold, 1k rules",
            "memself recall, engine running",
            "memself recall, no engine",
        )
    }
    recall_cli = [sys.executable, "-m", "memself", "recall", "支付模块的灰度开关配置在哪里"]
    cold_outputs: list[bytes] = []
    engines = [*path_envs.values(), rules_env]
    try:
        for target_env in engines:
            memself_cli(target_env, "engine", "start", "--timeout", "300")
            # The first answers encode the index and give the day's rewards; measure steady state.
            timed(hook, prompt, target_env)
            timed(hook, start, target_env)
        for _ in range(args.runs):
            rows["python -c pass"].append(timed([sys.executable, "-c", "pass"], b"", env))
            rows["python -I -S -c pass"].append(timed([sys.executable, "-I", "-S", "-c", "pass"], b"", env))
            for name, path_env in path_envs.items():
                rows[name].append(timed(hook, prompt, path_env))
            rows["session start, warm engine, 1k rules"].append(timed(hook, start, rules_env))
        for _ in range(args.cold_runs):
            rows["memself recall, engine running"].append(timed(recall_cli, b"", env))
            memself_cli(env, "engine", "stop")
            rows["memself recall, no engine"].append(timed(recall_cli, b"", env))
            rows["prompt hook, engine cold"].append(timed(hook, prompt, env, cold_outputs))
            memself_cli(rules_env, "engine", "stop")
            rows["session start, engine cold, 1k rules"].append(timed(hook, start, rules_env))
    finally:
        for target_env in engines:
            subprocess.run(
                [sys.executable, "-m", "memself", "engine", "stop"],
                env=target_env,
                capture_output=True,
                check=False,
            )
        shutil.rmtree(work, ignore_errors=True)

    floor = statistics.median(rows["python -c pass"])
    print(f"runs: {args.runs} warm, {args.cold_runs} cold; load average {os.getloadavg()[0]:.1f}\n")
    print("| what | p50 ms | p95 ms | p50 above `python -c pass` |")
    print("|---|---:|---:|---:|")
    for name, samples in rows.items():
        p50, p95 = percentiles(samples)
        print(f"| {name} | {p50:.1f} | {p95:.1f} | {p50 - floor:+.1f} |")
    recalled = sum(RECALL_MARK.encode() in out for out in cold_outputs)
    print(
        f"\ncold prompt hooks that carried the recalled fact: {recalled} of {len(cold_outputs)} "
        f"(slowest {max(rows['prompt hook, engine cold']):.0f} ms)"
    )


if __name__ == "__main__":
    main()
