"""Prompt hook wall time on a loaded machine: Cursor's ``beforeSubmitPrompt`` (5 s budget) while
CPU-burning processes compete for the cores.

Set-up: a temporary data directory with 1k memories (500 rules, 500 project facts), the offline
model (multilingual-e5-small) in a warm engine, then ``--burners`` processes that spin in a loop.
Each hook is run as Cursor runs the command setup registers for it, and timed to its reaped
exit, from the spawn call (what a host sees) and from the process's own start (what the hook's
deadline counts; the difference is the time the loaded machine took to fork it);
``--parallel`` hooks are in flight at once. Printed: p50, p95 and max, how many hooks took longer
than 4 s and 5 s, and what they answered (recall, no recall, nothing); then the same for a bare
interpreter that only reads its stdin, spawned the same way under the same load: the cost of
spawning, exiting and reaping a process there, whatever it runs.

    .venv/bin/python bench/bench_hook_load.py [--hooks 72] [--burners 22] [--parallel 1]

Uses the shared model cache (``MEMSELF_MODEL_CACHE``, default ``<repo>/.cache/models``);
nothing of the user's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from bench.bench_hooks import memself_cli, synthetic_memories, write_group  # noqa: E402
from memself.hook.command import hook_command  # noqa: E402
from memself.hosts.base import EventKind  # noqa: E402

CURSOR_PROMPT_HOOK = hook_command("cursor", EventKind.PROMPT_SUBMIT)  # what setup registers

PROMPTS = [
    "支付模块的灰度开关配置在哪里，上线前要检查什么",
    "订单服务的缓存由谁维护",
    "物流模块的 flag 默认开启吗",
    "网关日志需要评审吗",
    "监控告警的负责人是谁",
    "数据库权限怎么申请",
    "发布前要跑哪些测试",
    "司机端的配置不要直接修改是哪一项",
]
BURN = "while True:\n    pass\n"


def start_burners(count: int) -> list[subprocess.Popen[bytes]]:
    return [
        subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", BURN],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(count)
    ]


def stop_burners(burners: list[subprocess.Popen[bytes]]) -> None:
    for proc in burners:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
    for proc in burners:
        proc.wait()


def run_hook(
    index: int, env: dict[str, str], work: Path, argv: list[str] | None = None
) -> tuple[float, float, str]:
    """``(wall from the spawn call, time since the process's own start, answer)``; both end
    when the exit is reaped."""
    payload = json.dumps(
        {
            "hook_event_name": "beforeSubmitPrompt",
            "conversation_id": f"bench-load-{index % 6}",
            "generation_id": f"gen-{index}",
            "cursor_version": "3.20.17",
            "workspace_roots": [str(work)],
            "prompt": PROMPTS[index % len(PROMPTS)],
        },
        ensure_ascii=False,
    ).encode()
    started = time.clock_gettime(time.CLOCK_BOOTTIME)
    proc = subprocess.Popen(
        argv or CURSOR_PROMPT_HOOK,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    own_start = process_start(proc.pid)  # readable until the exit is reaped
    stdout, _ = proc.communicate(payload, timeout=120)
    ended = time.clock_gettime(time.CLOCK_BOOTTIME)
    outcome = f"exit {proc.returncode}" if proc.returncode else classify(stdout)
    if argv:
        outcome = "floor"
    return ended - started, ended - (own_start if own_start is not None else started), outcome


def process_start(pid: int) -> float | None:
    """A process's start in CLOCK_BOOTTIME seconds (field 22 of /proc/<pid>/stat)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
        return int(stat[stat.rindex(b")") + 2 :].split()[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def classify(stdout: bytes) -> str:
    try:
        answer = json.loads(stdout) if stdout.strip() else None
    except ValueError:
        return "bad output"
    if not answer:
        return "nothing"
    context = str(answer.get("additional_context", ""))
    return "recall" if "自动召回" in context else "no recall"


def percentile(ordered: list[float], share: float) -> float:
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hooks", type=int, default=72)
    parser.add_argument("--burners", type=int, default=22)
    parser.add_argument("--parallel", type=int, default=1)
    parser.add_argument(
        "--cold", action="store_true", help="no warm engine: the first hook starts it while the load runs"
    )
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="memself-bench-load-"))
    home = work / "data"
    home.mkdir(mode=0o700)
    env = {**os.environ, "MEMSELF_HOME": str(home), "HOME": str(work)}
    env.setdefault("MEMSELF_MODEL_CACHE", str(REPO_ROOT / ".cache" / "models"))
    write_group(home, "rule", synthetic_memories(500, "rule"))
    write_group(home, "project", synthetic_memories(500, "project"))
    memself_cli(env, "config", "model", "multilingual-e5-small")
    burners: list[subprocess.Popen[bytes]] = []
    results: list[tuple[float, float, str]] = []
    floor: list[tuple[float, float, str]] = []
    bare = [sys.executable, "-I", "-S", "-c", "import sys; sys.stdin.buffer.read()"]
    try:
        if not args.cold:
            memself_cli(env, "engine", "start", "--timeout", "300")
            for i in range(3):  # index encoded, the day's rewards given: steady state
                run_hook(i, env, work)
        burners = start_burners(args.burners)
        time.sleep(1.0)
        with ThreadPoolExecutor(max_workers=max(args.parallel, 1)) as pool:
            results = list(pool.map(lambda i: run_hook(i, env, work), range(args.hooks)))
            # The same spawns of a bare interpreter: what spawning, exiting and reaping a process
            # costs under this load, whatever it runs.
            floor = list(pool.map(lambda i: run_hook(i, env, work, bare), range(args.hooks)))
    finally:
        stop_burners(burners)
        subprocess.run(
            [sys.executable, "-m", "memself", "engine", "stop"], env=env, capture_output=True, check=False
        )
        shutil.rmtree(work, ignore_errors=True)

    engine = "engine cold at the start" if args.cold else "warm engine"
    print(
        f"{args.hooks} Cursor prompt hooks, {args.parallel} at a time, {args.burners} CPU burners, "
        f"{engine}, {os.cpu_count()} cores\n"
    )
    print("| what | measured from | p50 s | p95 s | max s | > 4 s | > 5 s | answers |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for name, rows in (("prompt hook", results), ("`python -I -S` reading stdin", floor)):
        outcomes: dict[str, int] = {}
        for _, _, outcome in rows:
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
        answers = ", ".join(f"{n} {c}" for n, c in sorted(outcomes.items()))
        for label, column in (("spawn call", 0), ("process start", 1)):
            times = sorted(row[column] for row in rows)
            print(
                f"| {name} | {label} | {statistics.median(times):.2f} | "
                f"{percentile(times, 0.95):.2f} | {times[-1]:.2f} | {sum(t > 4 for t in times)} | "
                f"{sum(t > 5 for t in times)} | {answers} |"
            )


if __name__ == "__main__":
    main()
