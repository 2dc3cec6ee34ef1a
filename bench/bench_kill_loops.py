"""The store's kill loops of two checkouts, side by side in one run: "before" and "after".

The loop is the one ``tests/adversarial/test_kill_loops.py`` runs (its scenarios, seeds and checks
are ``tests.adversarial.killloop``'s, imported from each checkout): a driver process forks a
writer that loops over real store writes (``add``: ``store.create``; ``delete``: deletes and
merges; ``restore``: trash back to the group files), SIGKILLs it at a random moment, and reads the
directory as the next memself process would: memories lost, duplicated, unreadable lines. Here
each kill is also timed:

- writes per second: writes the writer acknowledged, over the time it was alive (fork to kill);
- recovery: right after the kill, what the next writer does before it may write (the write lock,
  a killed writer's committed multi-file write replayed, its leftovers cleared);
- check: reading every file back and counting, as the test does.

Runs alternate between the two checkouts, kind by kind, so a load drift hits both alike. Each
checkout runs under its own ``.venv`` with its own code first on ``sys.path``.

    .venv/bin/python bench/bench_kill_loops.py BEFORE_ROOT AFTER_ROOT [--kills 20] [--rounds 10]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from checkouts import python_of

KINDS = ("add", "delete", "restore")
# The writer lives this long (seconds) before its SIGKILL: long enough for a few writes, so the
# kill lands in the middle of one more often than in the writer's start.
DELAY = (0.02, 0.2)


def drive(root: str, kind: str, kills: int, seed: int) -> dict[str, Any]:
    """One checkout's loop (run under that checkout's interpreter): per-kill timings and counts."""
    sys.path.insert(0, root)
    from memself.paths import DataPaths

    try:  # the package's layout since its reorganisation, else the one before
        from memself.store.lock import write_lock
        from memself.store.memory_store import MemoryStore
    except ImportError:
        from memself.lock import write_lock  # type: ignore[no-redef]
        from memself.store import MemoryStore  # type: ignore[no-redef,attr-defined]
    from tests.adversarial.killloop import SCENARIOS

    paths = DataPaths.default()
    paths.ensure()
    scenario = SCENARIOS[kind](paths)
    scenario.seed()
    rng = random.Random(seed)
    totals: dict[str, Any] = {"kind": kind, "kills": 0, "exited": 0, "lost": 0, "duplicated": 0}
    totals["unreadable"] = 0
    lives: list[float] = []
    writes: list[int] = []
    recovery_ms: list[float] = []
    check_ms: list[float] = []
    for _ in range(kills):
        child_seed = rng.getrandbits(32)
        acked_before = len(scenario.acked())
        born = time.monotonic()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                scenario.child(random.Random(child_seed))
            except BaseException:  # a child that fails must say so, not vanish
                import traceback

                traceback.print_exc()
                code = 3
            os._exit(code)
        time.sleep(rng.uniform(*DELAY))
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        killed = time.monotonic()
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
            totals["kills"] += 1
        else:
            totals["exited"] += 1
        lives.append(killed - born)
        writes.append(len(scenario.acked()) - acked_before)
        with write_lock(paths, 5.0):
            MemoryStore(paths).prepare_write()
        recovered = time.monotonic()
        state = scenario.read_state()
        lost, duplicated = scenario.check(state)
        check_ms.append((time.monotonic() - recovered) * 1000)
        recovery_ms.append((recovered - killed) * 1000)
        totals["lost"] += lost
        totals["duplicated"] += duplicated
        totals["unreadable"] += state["unreadable"]
        if state["unreadable"]:
            totals.setdefault("unreadable_seen", []).append(_unreadable(paths))
        if lost or duplicated or state["unreadable"] or scenario.needs_reseed(state):
            scenario.seed()  # a failure is counted once; then start clean
    totals.update(lives=lives, writes=writes, recovery_ms=recovery_ms, check_ms=check_ms)
    return totals


def _unreadable(paths: Any) -> list[str]:
    """What made a file unreadable: a last line without its newline, or a line that is not JSON."""
    found = []
    for path in (paths.group_file("rule"), paths.group_file("project"), paths.trash):
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            continue
        if data and not data.endswith(b"\n"):
            found.append(f"{path.name}: no newline at the end, last bytes {data[-60:]!r}")
        for line in data.splitlines():
            try:
                json.loads(line)
            except ValueError:
                found.append(f"{path.name}: not JSON: {line[:60]!r}...{line[-30:]!r} ({len(line)} bytes)")
    return found


def run_driver(root: Path, kind: str, kills: int, seed: int, home: Path) -> dict[str, Any]:
    home.mkdir(parents=True, mode=0o700)
    env = {**os.environ, "MEMSELF_HOME": str(home), "HOME": str(home.parent)}
    result = subprocess.run(
        [python_of(root), str(Path(__file__).resolve()), "--driver", str(root), kind, str(kills), str(seed)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if result.returncode != 0:
        raise SystemExit(f"{root} {kind}: exit {result.returncode}: {result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--driver":
        root, kind, kills, seed = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
        print(json.dumps(drive(root, kind, kills, seed)), flush=True)
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--kills", type=int, default=20, help="kills per run")
    parser.add_argument("--rounds", type=int, default=10, help="runs per kind and checkout")
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--seed", type=int, default=20261203)
    args = parser.parse_args()
    roots = {"before": args.before.resolve(), "after": args.after.resolve()}
    kinds = [k for k in args.kinds.split(",") if k]
    load_before = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="memself-bench-kill-"))
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {(k, n): [] for k in kinds for n in roots}
    try:
        order = list(roots)
        for i in range(args.rounds):
            for kind in kinds:
                seed = args.seed + i  # both checkouts get the same kills
                for name in order if i % 2 == 0 else list(reversed(order)):
                    home = work / f"{kind}-{i}-{name}" / "data"
                    runs[(kind, name)].append(run_driver(roots[name], kind, args.kills, seed, home))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    load_after = os.getloadavg()

    print(f"{args.rounds} runs of {args.kills} kills per kind and checkout, alternating")
    print(f"load average (1/5/15 min) before the run {'/'.join(f'{x:.2f}' for x in load_before)},")
    print(f"after it {'/'.join(f'{x:.2f}' for x in load_after)}")
    for name, root in roots.items():
        print(f"- {name}: {root}")
    print(
        "\n| kind | checkout | kills | lost | duplicated | unreadable | writes/s, median of runs"
        " | recovery per kill, median (p95) ms | check per kill, median ms |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for kind in kinds:
        for name in roots:
            done = runs[(kind, name)]
            rates = [sum(r["writes"]) / sum(r["lives"]) for r in done]
            recovery = sorted(ms for r in done for ms in r["recovery_ms"])
            check = [ms for r in done for ms in r["check_ms"]]
            p95 = recovery[min(len(recovery) - 1, round(0.95 * (len(recovery) - 1)))]
            print(
                f"| {kind} | {name} | {sum(r['kills'] for r in done)} | {sum(r['lost'] for r in done)}"
                f" | {sum(r['duplicated'] for r in done)} | {sum(r['unreadable'] for r in done)}"
                f" | {statistics.median(rates):.1f} | {statistics.median(recovery):.2f}"
                f" ({p95:.2f}) | {statistics.median(check):.2f} |"
            )
        for name in roots:
            for run in runs[(kind, name)]:
                for seen in run.get("unreadable_seen", []):
                    print(f"| {kind} | {name}: unreadable after a kill: {'; '.join(seen)} | | | | | | | |")
        exited = sum(r["exited"] for name in roots for r in runs[(kind, name)])
        if exited:
            print(f"| {kind} | (writers that exited before their kill: {exited}) | | | | | | | |")


if __name__ == "__main__":
    main()
