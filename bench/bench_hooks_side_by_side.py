"""The warm hooks of two checkouts, side by side in one run: "before" and "after" a change.

Each checkout (a clone or worktree with its own ``.venv``) gets its own data directory holding
the same 1k memories and its own warm engine on the offline model; runs alternate between the
two, so a load drift on a shared machine hits both rows alike. Rows: the prompt hook and the
session start, as each checkout registers them for Claude Code, and the engine's start on the
already indexed store (``memself engine start`` until it says ready, from a stopped engine).

    .venv/bin/python bench/bench_hooks_side_by_side.py BEFORE_ROOT AFTER_ROOT [--runs 60] [--starts 8]

Uses the shared model cache (``MEMSELF_MODEL_CACHE``, default ``<this repo>/.cache/models``).
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_engine_start import wait_indexed
from bench_hooks import FACT, percentiles, synthetic_memories, timed, write_group
from checkouts import cli, python_of, stop_engines

REPO_ROOT = Path(__file__).resolve().parent.parent
PROMPT = "支付模块的灰度开关配置在哪里，上线前要检查什么"


def hook_argv(root: Path, kind: str) -> list[str]:
    """The command ``root``'s own installer registers for Claude Code's ``kind`` event."""
    # memself.hook.command since the package's reorganisation, memself.hooks.command before it.
    module = (
        "memself.hook.command"
        if (root / "memself" / "hook" / "command.py").exists()
        else "memself.hooks.command"
    )
    code = (
        f"import json, sys; from {module} import hook_command; "
        "from memself.hosts.base import EventKind; "
        f"print(json.dumps(hook_command('claude', EventKind.{kind})))"
    )
    out = subprocess.run([python_of(root), "-c", code], cwd=root, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--starts", type=int, default=8)
    args = parser.parse_args()
    roots = {"before": args.before.resolve(), "after": args.after.resolve()}

    work = Path(tempfile.mkdtemp(prefix="memself-bench-side-"))
    envs: dict[str, dict] = {}
    payloads: dict[str, bytes] = {}
    for name in roots:
        home = work / name / "data"
        home.mkdir(parents=True, mode=0o700)
        env = {**os.environ, "MEMSELF_HOME": str(home), "HOME": str(work / name)}
        env.setdefault("MEMSELF_MODEL_CACHE", str(REPO_ROOT / ".cache" / "models"))
        envs[name] = env
        write_group(home, "rule", synthetic_memories(500, "rule"))
        write_group(home, "project", synthetic_memories(499, "project"))
    base_prompt = {"hook_event_name": "UserPromptSubmit", "session_id": "bench", "prompt": PROMPT}
    base_start = {"hook_event_name": "SessionStart", "session_id": "bench", "source": "startup"}
    hooks = {
        name: {k: hook_argv(root, k) for k in ("PROMPT_SUBMIT", "SESSION_START")}
        for name, root in roots.items()
    }
    whats = ("prompt hook", "session start", "engine start to ready")
    rows: dict[str, list[float]] = {f"{what}, {name}": [] for what in whats for name in roots}
    try:
        for name, root in roots.items():
            env = envs[name]
            cli(root, env, "config", "model", "multilingual-e5-small")
            cli(root, env, "project", "add", FACT)
            cli(root, env, "engine", "start", "--timeout", "300")
            # Every memory encoded first: a backlog left over would share the cores with the hooks
            # and with the engine starts below.
            wait_indexed(root, env)
            payloads[f"prompt {name}"] = json.dumps({**base_prompt, "cwd": str(work / name)}).encode()
            payloads[f"start {name}"] = json.dumps({**base_start, "cwd": str(work / name)}).encode()
            for _ in range(3):  # the first answers encode the index and give the day's rewards
                timed(hooks[name]["PROMPT_SUBMIT"], payloads[f"prompt {name}"], env)
                timed(hooks[name]["SESSION_START"], payloads[f"start {name}"], env)
        order = list(roots)
        for i in range(args.runs):
            for name in order if i % 2 == 0 else reversed(order):
                env = envs[name]
                rows[f"prompt hook, {name}"].append(
                    timed(hooks[name]["PROMPT_SUBMIT"], payloads[f"prompt {name}"], env)
                )
                rows[f"session start, {name}"].append(
                    timed(hooks[name]["SESSION_START"], payloads[f"start {name}"], env)
                )
        for i in range(args.starts):
            for name in order if i % 2 == 0 else reversed(order):
                root, env = roots[name], envs[name]
                cli(root, env, "engine", "stop")
                rows[f"engine start to ready, {name}"].append(
                    timed([python_of(root), "-m", "memself", "engine", "start", "--timeout", "300"], b"", env)
                )
    finally:
        stop_engines(roots, envs)
        shutil.rmtree(work, ignore_errors=True)

    print(f"runs: {args.runs} each, alternating; load average {os.getloadavg()[0]:.1f}")
    for name, root in roots.items():
        print(f"- {name}: {root}")
    print("\n| what | p50 ms | p95 ms |")
    print("|---|---:|---:|")
    for name, samples in rows.items():
        p50, p95 = percentiles(samples)
        print(f"| {name} | {p50:.1f} | {p95:.1f} |")
    for what in whats:
        before = statistics.median(rows[f"{what}, before"])
        after = statistics.median(rows[f"{what}, after"])
        print(f"\n{what}: p50 after - before = {after - before:+.1f} ms")


if __name__ == "__main__":
    main()
