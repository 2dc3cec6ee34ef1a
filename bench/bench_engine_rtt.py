"""Round trip to a warm engine from a fresh ``python -I -S`` process, next to the start-up floor.

Prints a markdown table of p50/p95 wall times (process start to exit) over N runs of:
``python -c pass``, ``python -I -S -c pass``, the same importing json (any hook needs it), the
engine client (with ``memself.paths``, as the hook uses it), and the same sending one ``ping`` to
a warm engine; plus the in-process ``ping`` round trip alone.
The runs are interleaved so machine load drifts hit every row alike.

    .venv/bin/python bench/bench_engine_rtt.py [--runs 50]

The engine hosts a null service (``ping`` never reaches the service anyway) in a temporary data
directory, so the user's own engine is not touched.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


class NullService:
    """Answers nothing but echoes; enough for the engine's own ops."""

    def __init__(self, paths: object) -> None:
        self.paths = paths

    def warm_up(self) -> None:
        pass

    def reload(self) -> None:
        pass

    def handle(self, op: str, payload: dict) -> dict:
        return {"op": op}


def make_null_service(paths: object) -> NullService:
    return NullService(paths)


_IMPORT_ONLY = (
    "import sys; sys.path.insert(0, sys.argv[1])\n"
    "from memself.engine.client import EngineClient\n"
    "from memself.paths import DataPaths\n"
)
_PING = _IMPORT_ONLY + ("info = EngineClient(DataPaths.default()).ping(1.0)\nassert info['ready'], info\n")


# The same round trip without memself.paths (dataclasses, inspect, pathlib): how much of the
# hook's import cost is the engine client's own.
_PING_BARE = (
    "import os, sys; sys.path.insert(0, sys.argv[1])\n"
    "from memself.engine.client import EngineClient\n"
    "class Paths:\n"
    "    root = os.environ['MEMSELF_HOME']\n"
    "info = EngineClient(Paths()).ping(1.0)\n"
    "assert info['ready'], info\n"
)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def _time_command(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, env=env, check=True, stdin=subprocess.DEVNULL)
    return (time.perf_counter() - started) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="msb-", dir="/tmp"))
    env = dict(os.environ)
    env.update(
        {
            "MEMSELF_HOME": str(work / "data"),
            "MEMSELF_RUNTIME_DIR": str(work / "run"),
            "MEMSELF_ENGINE_SERVICE": "bench_engine_rtt:make_null_service",
            "PYTHONPATH": str(Path(__file__).resolve().parent),
        }
    )
    os.environ.update(env)
    sys.path.insert(0, str(REPO_ROOT))
    from memself.engine.client import EngineClient, call_engine, stop_engine
    from memself.paths import DataPaths

    paths = DataPaths.default()
    python = sys.executable
    rows = {
        "`python -c pass` (floor)": [python, "-c", "pass"],
        "`python -I -S -c pass`": [python, "-I", "-S", "-c", "pass"],
        "`-I -S`, import json (every hook pays this)": [python, "-I", "-S", "-c", "import json"],
        "`-I -S`, import engine client": [python, "-I", "-S", "-c", _IMPORT_ONLY, str(REPO_ROOT)],
        "`-I -S`, import client + `ping` (warm engine)": [python, "-I", "-S", "-c", _PING, str(REPO_ROOT)],
        "`-I -S`, client + `ping`, without memself.paths": [
            python,
            "-I",
            "-S",
            "-c",
            _PING_BARE,
            str(REPO_ROOT),
        ],
    }
    try:
        call_engine(paths, "ping", None, timeout_s=30)
        client = EngineClient(paths)
        for command in rows.values():  # warm the page cache and bytecode caches
            _time_command(command, env)
        samples: dict[str, list[float]] = {name: [] for name in rows}
        for _ in range(args.runs):
            for name, command in rows.items():
                samples[name].append(_time_command(command, env))
        in_process = []
        for _ in range(max(args.runs, 200)):
            started = time.perf_counter()
            client.ping(1.0)
            in_process.append((time.perf_counter() - started) * 1000)
    finally:
        stop_engine(paths)
        shutil.rmtree(work, ignore_errors=True)

    floor = statistics.median(samples["`python -c pass` (floor)"])
    print(
        f"Engine ping round trip, {args.runs} runs each, {os.cpu_count()} CPUs, "
        f"Python {sys.version.split()[0]}\n"
    )
    print("| process | p50 ms | p95 ms | p50 vs `python -c pass` |")
    print("|---|---:|---:|---:|")
    for name, values in samples.items():
        p50 = statistics.median(values)
        print(f"| {name} | {p50:.1f} | {_percentile(values, 0.95):.1f} | {p50 - floor:+.1f} |")
    print(
        f"| `ping` alone, in-process warm client ({len(in_process)} runs) | "
        f"{statistics.median(in_process):.2f} | {_percentile(in_process, 0.95):.2f} | |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
