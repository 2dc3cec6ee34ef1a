"""The engine's start of two checkouts taken apart, side by side in one run: "before" and "after".

Each checkout (a clone or worktree with its own ``.venv``) gets its own data directory holding the
same 1k memories, indexed with the offline model (every memory, not only up to "ready"). Then,
per round and alternating between the two (a load drift on a shared machine hits both alike):

- ``memself engine start`` from a stopped engine until it says ready, as the user runs it;
- the engine alone, run by ``engine_start_probe.py`` the way the checkout's client spawns it
  (``-I`` where the checkout has the isolated launcher), with the time of each phase: interpreter
  start, imports, the lock, listening, the model session, the index and the store, the warm-up;
- ``memself engine start`` against a running engine (the command's own cost: interpreter, CLI
  imports, one ping).

Then ``python -X importtime`` over the modules each engine had loaded at ready: self time summed
per top-level package, and the modules only one of them loads.

    .venv/bin/python bench/bench_engine_start.py BEFORE_ROOT AFTER_ROOT [--starts 20] [--imports 5]

Uses the shared model cache (``MEMSELF_MODEL_CACHE``, default ``<this repo>/.cache/models``).
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
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_hooks import FACT, synthetic_memories, timed, write_group
from checkouts import cli, python_of, stop_engines

REPO_ROOT = Path(__file__).resolve().parent.parent
PROBE = Path(__file__).resolve().parent / "engine_start_probe.py"
READY_WAIT_S = 300.0


def wait_indexed(root: Path, env: dict, timeout_s: float = 900.0) -> None:
    """Wait until the running engine has a vector for every memory. "Ready" comes before that
    (the rest is encoded in the background), and an engine stopped earlier leaves the rest to the
    next start, whose warm-up then shares the cores with that encoding."""
    deadline = time.monotonic() + timeout_s
    while True:
        out = subprocess.run(
            [python_of(root), "-m", "memself", "engine", "status", "--json"],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        service = json.loads(out).get("service") or {}
        memories = int(service.get("memories") or 0)
        if memories and int(service.get("indexed") or 0) >= memories and not service.get("backlog"):
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"{root}: the engine did not index every memory in {timeout_s:.0f} s")
        time.sleep(1.0)


def engine_flags(root: Path) -> list[str]:
    """How the checkout's client starts an engine's interpreter: isolated where it has the launcher."""
    return ["-I"] if (root / "memself" / "launcher.py").exists() else []


def engine_help_argv(root: Path) -> list[str]:
    """The checkout's own engine command line with ``--help``: the interpreter, the launcher
    (where there is one) and the engine's module imports, then argparse's help and exit."""
    launcher = root / "memself" / "launcher.py"
    module = "memself.warm" if (root / "memself" / "warm" / "__main__.py").exists() else "memself.engine"
    if launcher.exists():
        return [python_of(root), "-I", str(launcher), module, "--help"]
    return [python_of(root), "-m", module, "--help"]


def probe_start(root: Path, env: dict, home: Path, events_file: Path) -> dict:
    """One engine start under the probe: phase durations (ms) and the modules loaded at ready."""
    events_file.unlink(missing_ok=True)
    command = [
        python_of(root),
        *engine_flags(root),
        str(PROBE),
        str(root),
        str(events_file),
        "serve",
        "--data-dir",
        str(home),
    ]
    spawned = time.monotonic()
    process = subprocess.Popen(
        command,
        env=env,
        cwd=root,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = spawned + READY_WAIT_S
        while not events_file.exists():
            if process.poll() is not None:
                raise SystemExit(f"probe exited {process.returncode}: {process.stderr.read()[-2000:]!r}")
            if time.monotonic() > deadline:
                raise SystemExit("probe: no ready")
            time.sleep(0.005)
        time.sleep(0.02)  # the file is written in one go; let the writer close it
        data = json.loads(events_file.read_text(encoding="utf-8"))
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    phases: dict[str, float] = defaultdict(float)
    main = ready = 0.0
    for label, start, end in data["events"]:
        phases[label] += (end - start) * 1000
        if label == "probe main":
            main = start
        if label == "warm-up (to ready)":
            ready = end
    phases["interpreter start (spawn to the probe's first line)"] = (main - spawned) * 1000
    phases["spawn to ready"] = (ready - spawned) * 1000
    del phases["probe main"]
    return {"phases": dict(phases), "modules": data["modules"]}


def probe_cli_start(root: Path, env: dict, events_dir: Path) -> dict[str, float]:
    """``memself engine start`` from a stopped engine with both processes under the probe: where
    the time between the command's start and its exit goes (ms), and how many requests it sent."""
    for name in ("cli.json", "engine.json"):
        (events_dir / name).unlink(missing_ok=True)
    command = [python_of(root), str(PROBE), "--cli", str(root), str(events_dir)]
    spawned = time.monotonic()
    subprocess.run(
        [*command, "engine", "start", "--timeout", "300"], env=env, cwd=root, capture_output=True, check=True
    )
    ended = time.monotonic()
    cli_events = json.loads((events_dir / "cli.json").read_text(encoding="utf-8"))["events"]
    engine_events = json.loads((events_dir / "engine.json").read_text(encoding="utf-8"))["events"]
    first = {label: (start, end) for label, start, end in reversed(cli_events)}
    engine = {label: (start, end) for label, start, end in reversed(engine_events)}
    imported = first["cli: import memself.cli"][1]
    spawn = first["cli: spawn"][0]
    ready = engine["warm-up (to ready)"][1]
    seen = first["cli: request ping (ready)"][1]
    return {
        "the command: interpreter start": (first["probe main"][0] - spawned) * 1000,
        "the command: `import memself.cli`": (imported - first["cli: import memself.cli"][0]) * 1000,
        "the command: its imports to the spawn": (spawn - imported) * 1000,
        "the engine: spawn to its first line": (engine["probe main"][0] - spawn) * 1000,
        "the engine: first line to ready": (ready - engine["probe main"][0]) * 1000,
        "the command: engine ready to the ping that sees it": (seen - ready) * 1000,
        "the command: that ping to its exit": (ended - seen) * 1000,
        "total": (ended - spawned) * 1000,
        "requests the command sent": float(sum(1 for label, _, _ in cli_events if "request" in label)),
    }


def import_times(root: Path, env: dict, modules: list[str]) -> dict[str, float]:
    """``-X importtime`` self time (ms) per top-level package, importing ``modules`` in a fresh
    interpreter started as the checkout starts its engine."""
    wanted = [m for m in modules if not m.startswith("__") and m not in ("engine_start_probe",)]
    code = (
        "import sys, importlib\n"
        f"sys.path.insert(0, {str(root)!r})\n"
        f"for name in {wanted!r}:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception:\n"
        "        pass\n"
    )
    result = subprocess.run(
        [python_of(root), *engine_flags(root), "-X", "importtime", "-c", code],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    )
    per_package: dict[str, float] = defaultdict(float)
    for line in result.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, _cumulative, name = line[len("import time:") :].split("|", 2)
        per_package[name.strip().split(".")[0]] += int(self_us) / 1000
    return dict(per_package)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--starts", type=int, default=20)
    parser.add_argument("--imports", type=int, default=5, help="importtime runs per checkout")
    args = parser.parse_args()
    roots = {"before": args.before.resolve(), "after": args.after.resolve()}
    load_before = os.getloadavg()

    work = Path(tempfile.mkdtemp(prefix="memself-bench-start-"))
    envs: dict[str, dict] = {}
    homes: dict[str, Path] = {}
    for name in roots:
        home = work / name / "data"
        home.mkdir(parents=True, mode=0o700)
        env = {**os.environ, "MEMSELF_HOME": str(home), "HOME": str(work / name)}
        env.setdefault("MEMSELF_MODEL_CACHE", str(REPO_ROOT / ".cache" / "models"))
        envs[name], homes[name] = env, home
        write_group(home, "rule", synthetic_memories(500, "rule"))
        write_group(home, "project", synthetic_memories(499, "project"))
    cli_start: dict[str, list[float]] = {name: [] for name in roots}
    cli_running: dict[str, list[float]] = {name: [] for name in roots}
    engine_help: dict[str, list[float]] = {name: [] for name in roots}
    phases: dict[str, dict[str, list[float]]] = {name: defaultdict(list) for name in roots}
    cli_phases: dict[str, dict[str, list[float]]] = {name: defaultdict(list) for name in roots}
    modules: dict[str, list[str]] = {}
    try:
        for name, root in roots.items():
            env = envs[name]
            cli(root, env, "config", "model", "multilingual-e5-small")
            cli(root, env, "project", "add", FACT)
            cli(root, env, "engine", "start", "--timeout", "300")
            wait_indexed(root, env)
            cli(root, env, "engine", "stop")
        order = list(roots)
        for i in range(args.starts):
            for name in order if i % 2 == 0 else list(reversed(order)):
                root, env = roots[name], envs[name]
                start = [python_of(root), "-m", "memself", "engine", "start", "--timeout", "300"]
                cli_start[name].append(timed(start, b"", env))
                cli_running[name].append(timed(start, b"", env))
                engine_help[name].append(timed(engine_help_argv(root), b"", env))
                cli(root, env, "engine", "stop")
                probed = probe_start(root, env, homes[name], work / name / "events.json")
                for label, ms in probed["phases"].items():
                    phases[name][label].append(ms)
                modules[name] = probed["modules"]
                for label, ms in probe_cli_start(root, env, work / name).items():
                    cli_phases[name][label].append(ms)
                cli(root, env, "engine", "stop")
        imports: dict[str, dict[str, list[float]]] = {name: defaultdict(list) for name in roots}
        totals: dict[str, list[float]] = {name: [] for name in roots}
        for i in range(args.imports):
            for name in order if i % 2 == 0 else list(reversed(order)):
                per_package = import_times(roots[name], envs[name], modules[name])
                for package, ms in per_package.items():
                    imports[name][package].append(ms)
                totals[name].append(sum(per_package.values()))
    finally:
        stop_engines(roots, envs)
        shutil.rmtree(work, ignore_errors=True)
    load_after = os.getloadavg()

    def med(samples: list[float]) -> str:
        return f"{statistics.median(samples):.1f}" if samples else "-"

    print(f"starts: {args.starts} each, alternating; load average (1/5/15 min)")
    print(f"  before the run {load_before[0]:.2f}/{load_before[1]:.2f}/{load_before[2]:.2f},")
    print(f"  after it {load_after[0]:.2f}/{load_after[1]:.2f}/{load_after[2]:.2f}")
    for name, root in roots.items():
        print(f"- {name}: {root}")
    print("\n| what, median ms | before | after | after - before |")
    print("|---|---:|---:|---:|")
    rows = [
        ("`memself engine start`, stopped engine to ready", cli_start),
        ("`memself engine start`, engine already running", cli_running),
        ("engine command line `--help` (interpreter, launcher, engine imports)", engine_help),
    ]
    for label, samples in rows:
        b, a = statistics.median(samples["before"]), statistics.median(samples["after"])
        print(f"| {label} | {b:.1f} | {a:.1f} | {a - b:+.1f} |")
    print("\n`memself engine start` from a stopped engine, the command and the engine under the probe:\n")
    print("| step, median | before | after | after - before |")
    print("|---|---:|---:|---:|")
    for label in cli_phases["before"]:
        b, a = cli_phases["before"][label], cli_phases["after"][label]
        print(f"| {label} | {med(b)} | {med(a)} | {statistics.median(a) - statistics.median(b):+.1f} |")
    labels = list(dict.fromkeys([*phases["before"], *phases["after"]]))
    print("\nThe engine alone, under the probe (durations of nested phases overlap their parents):\n")
    print("| phase, median ms | before | after | after - before |")
    print("|---|---:|---:|---:|")
    for label in labels:
        b, a = phases["before"].get(label, []), phases["after"].get(label, [])
        diff = f"{statistics.median(a) - statistics.median(b):+.1f}" if a and b else ""
        print(f"| {label} | {med(b)} | {med(a)} | {diff} |")
    print(
        f"\n`-X importtime` over the modules loaded at ready, self time per package ({args.imports} runs):\n"
    )
    print("| package | before ms | after ms | after - before |")
    print("|---|---:|---:|---:|")
    packages = sorted(
        set(imports["before"]) | set(imports["after"]),
        key=lambda p: -max(statistics.median(imports[n].get(p, [0.0])) for n in roots),
    )
    for package in packages[:25]:
        b = statistics.median(imports["before"].get(package, [0.0]))
        a = statistics.median(imports["after"].get(package, [0.0]))
        print(f"| {package} | {b:.1f} | {a:.1f} | {a - b:+.1f} |")
    print(f"| all | {med(totals['before'])} | {med(totals['after'])} | |")
    only_after = sorted(set(modules["after"]) - set(modules["before"]))
    only_before = sorted(set(modules["before"]) - set(modules["after"]))
    print(f"\nmodules at ready: before {len(modules['before'])}, after {len(modules['after'])}")
    print(f"only after ({len(only_after)}): {' '.join(only_after)}")
    print(f"only before ({len(only_before)}): {' '.join(only_before)}")


if __name__ == "__main__":
    main()
