"""memself at scale: every command and hook timed on 1k, 10k and 100k synthetic memories (~1% rules).

Each sample is a real ``memself`` process (or the hook command setup registers), timed from
start to exit; the table gives the median of ``--runs`` samples (times ``--rounds``), the median
CPU time of the process (user + system: it moves far less with the load) and the largest max RSS among
them (``/usr/bin/time`` of that process: the engine's own memory is not in the hook rows).

Rows:
- ``project add`` / ``rule add``: a new memory (an append); ``project add, a duplicate``: the same
  text again (the memory that holds it is reinforced); ``delete`` / ``restore`` of one memory;
- ``project add, no duplicate sidecar yet``: one sample, the first add on the generated store (it
  builds the duplicate sidecar from a full parse); ``project add, first after an outside change``:
  the add after another program (the original, another client) appended one line to the group
  file, so the sidecar no longer matches it;
- ``open, after an add`` / ``after a delete`` / ``nothing changed``: ``memself open --no-browser``
  (the page generated from the store) after a ``project add`` (an append), after a ``delete`` (a
  line cut out of the group file) and at once again;
- ``list``: the default view, right after a ``delete`` and a ``restore`` (the delete cut a line out
  of the group file, so its cached summary is rebuilt); ``list, nothing changed``: a second
  ``list`` at once;
- ``daily maintenance``: the detached run a session start starts (``python -m memself.maintenance``),
  decay state removed before each sample so it does the day's work;
- ``session start, engine cold`` and ``..., first of the day`` (maintenance due): the hook with no
  engine running (it starts one, stopped again after each sample);
- ``engine ready``, ``session start, warm engine``, ``prompt hook, warm engine``: with every memory
  indexed (the engine waited for until its status shows no backlog, then checked to have answered
  the prompt hook itself). Up to ``--encode-max`` memories the engine encodes them with the model;
  above it (encoding 100k memories takes a long time on a small machine) these rows are skipped,
  or with ``--synthetic-vectors`` measured on an index of random unit vectors written through
  ``memself.index`` under the engine's own model key, so the engine has nothing to encode.
  Scoring time does not depend on the vectors' values; the table's notes say which sizes used them.

    TMPDIR=/dev/shm .venv/bin/python bench/bench_scale.py [--sizes 1000,10000,100000] [--runs 5] \
        [--encode-max 10000] [--synthetic-vectors] [--hook-runs N] \
        [--checkouts before=BEFORE_ROOT,after=AFTER_ROOT --rounds 2] [--sections outside,open]

With ``--checkouts`` each checkout (its own ``.venv``, ``bench/checkouts.py``) runs on a copy of
the same store, one after the other, the order alternating per round.

Uses temporary data directories with the offline model (multilingual-e5-small) and the shared
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
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from bench.bench_hooks import synthetic_memories  # noqa: E402
from bench.checkouts import python_of  # noqa: E402
from memself.engine.client import engine_status  # noqa: E402
from memself.hook.command import hook_command  # noqa: E402
from memself.hosts.base import EventKind  # noqa: E402
from memself.paths import DataPaths  # noqa: E402
from memself.store.memory_store import render_lines  # noqa: E402
from memself.store.records import Memory, sort_memories  # noqa: E402
from memself.timeutil import iso  # noqa: E402

PROMPT = "支付模块的灰度开关配置在哪里，上线前要检查什么"
SECTIONS = {"outside", "open", "writes", "hooks", "engine"}


def generate(home: Path, count: int) -> list[str]:
    """``count`` memories, 1% rules, two thirds of the facts in one of seven workspaces; returns
    the project ids. Written sorted, as a full write leaves them."""
    home.mkdir(mode=0o700, parents=True)
    rules = max(1, count // 100)
    project_ids = []
    for group, size in (("rule", rules), ("project", count - rules)):
        memories = []
        for i, raw in enumerate(synthetic_memories(size, group)):
            raw["text"] += " 补充说明：这是为了让记录长度接近真实数据的填充文字"
            if group == "project" and i % 3:
                raw["workspace"], raw["workspaceName"] = f"/srv/repos/repo{i % 7}", f"repo{i % 7}"
            memory = Memory.from_json(raw, group)
            assert memory is not None
            memories.append(memory)
        (home / f"{group}.jsonl").write_bytes(render_lines(m.to_json() for m in sort_memories(memories)))
        if group == "project":
            project_ids = [m.id for m in memories]
    return project_ids


class RandomVectors:
    """Stands in for the engine's memory-side encoder when writing the index: the same model key,
    dimension and appliesWhen views (so the rows are the ones the engine looks for), random unit
    vectors instead of encodings."""

    def __init__(self, side: Any, seed: int) -> None:
        import numpy as np

        self.model_id, self.dim, self.views = side.model_id, side.dim, side.views
        self._rng = np.random.default_rng(seed)

    def encode_passages(self, texts: list[str]) -> Any:
        vectors = self._rng.standard_normal((len(texts), self.dim)).astype("float32")
        return vectors / ((vectors**2).sum(axis=1, keepdims=True) ** 0.5)

    encode_queries = encode_passages


def write_synthetic_index(home: Path, cache: Path) -> int:
    """Index every memory of ``home`` as the engine would, with random vectors; returns the rows
    written. The model is loaded only for its key and dimension."""
    from memself.config import load_config
    from memself.index.sync import VectorIndex
    from memself.model.encoder import load_encoder
    from memself.recall.memory_side import memory_side
    from memself.store.memory_store import MemoryStore

    paths = DataPaths(home)
    side = memory_side(load_encoder(load_config(paths).model, cache_dir=cache))
    index = VectorIndex.for_paths(paths)
    result = index.sync(MemoryStore(paths).all(), RandomVectors(side, seed=len(index)))
    if result.failed:
        raise SystemExit(f"synthetic index: {len(result.failed)} rows failed")
    return len(index)


def wait_fully_indexed(home: Path, timeout_s: float) -> dict[str, Any]:
    """The engine's status once nothing is left to encode (no backlog, every memory indexed)."""
    deadline = time.monotonic() + timeout_s
    while True:
        service = (engine_status(DataPaths(home), 5.0) or {}).get("service") or {}
        if (
            service.get("backlog") is None
            and not service.get("busy")
            and service.get("memories")
            and service.get("indexed", 0) >= service["memories"]
        ):
            return service
        if time.monotonic() > deadline:
            raise SystemExit(f"engine still encoding after {timeout_s:.0f} s: {service}")
        time.sleep(0.5)


def last_hook_note(home: Path) -> str:
    """The note of the last ``hook-run`` line of the data directory's log ("engine": the engine
    answered the hook)."""
    lines = [
        line for line in DataPaths(home).log_file.read_text("utf-8").splitlines() if " hook-run " in line
    ]
    if not lines:
        return ""
    return str(json.loads(lines[-1].split(" hook-run ", 1)[1]).get("note", ""))


def run(
    args: list[str], env: dict[str, str], stdin: bytes = b"", cwd: Path | None = None
) -> tuple[float, int, float]:
    """Milliseconds from start to exit, max RSS (MiB) and CPU milliseconds (user + system) of one
    process. CPU time moves far less with the machine's load than the wall clock; it counts only
    this process (not an engine it talks to or starts).

    The RSS comes from ``/usr/bin/time``: Linux carries a parent's peak RSS into a child it
    starts (across the exec), so ``wait4`` from this process would report this process's own
    peak for every child."""
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as rss:
        started = time.perf_counter()
        result = subprocess.run(
            ["/usr/bin/time", "-f", "%M %U %S", "-o", rss.name, *args],
            input=stdin,
            capture_output=True,
            env=env,
            cwd=cwd,
            check=False,
        )
        elapsed = (time.perf_counter() - started) * 1000
        if result.returncode != 0:
            raise SystemExit(f"{args} exited {result.returncode}: {result.stderr[-800:]!r}")
        kib, user, system = rss.read().split()[-3:]
        return elapsed, int(kib) // 1024, (float(user) + float(system)) * 1000


class Checkout:
    """The code a column measures: this checkout (``root`` None), or another one run with its own
    interpreter from its own directory (``bench/checkouts.py``), hooks through its own entry."""

    def __init__(self, name: str, root: Path | None) -> None:
        self.name, self.root = name, root
        self.python = python_of(root) if root is not None else sys.executable

    def hook(self, kind: EventKind) -> list[str]:
        argv = hook_command("claude", kind)
        if self.root is None:
            return argv
        # [python, -I, -S, entry, ...]: the checkout's interpreter and entry file
        return [self.python, *argv[1:3], str(self.root / "hooks" / "entry.py"), *argv[4:]]


def memself(env: dict[str, str], *args: str, checkout: Checkout | None = None) -> None:
    python, cwd = (checkout.python, checkout.root) if checkout is not None else (sys.executable, None)
    subprocess.run([python, "-m", "memself", *args], env=env, cwd=cwd, capture_output=True, check=True)


def payload(kind: str, cwd: Path) -> bytes:
    if kind == "start":
        event = {
            "hook_event_name": "SessionStart",
            "session_id": "bench",
            "source": "startup",
            "cwd": str(cwd),
        }
    else:
        event = {
            "hook_event_name": "UserPromptSubmit",
            "session_id": "bench",
            "prompt": PROMPT,
            "cwd": str(cwd),
        }
    return json.dumps(event).encode()


def prepare(count: int, vectors: str, work: Path) -> tuple[Path, list[str]]:
    """The store every checkout of this size starts from (and its index with "synthetic")."""
    home = work / f"data-{count}"
    ids = generate(home, count)
    env = {**os.environ, "MEMSELF_HOME": str(home), "HOME": str(work)}
    env.setdefault("MEMSELF_MODEL_CACHE", str(REPO_ROOT / ".cache" / "models"))
    memself(env, "config", "model", "multilingual-e5-small")
    if vectors == "synthetic":
        rows = write_synthetic_index(home, Path(env["MEMSELF_MODEL_CACHE"]))
        print(f"{count}: synthetic index of {rows} rows written", file=sys.stderr, flush=True)
    return home, ids


def outside_append(home: Path, k: int) -> None:
    """One project fact appended to the group file by another program, as the original appends."""
    memory = Memory.create(f"另一个程序追加的项目事实第 {k} 条", "project", datetime.now(timezone.utc))
    with open(home / "project.jsonl", "ab") as handle:
        handle.write(render_lines([memory.to_json()]))


def measure(
    template: Path,
    ids: list[str],
    runs: int,
    hook_runs: int,
    vectors: str,
    work: Path,
    checkout: Checkout,
    sections: set[str] = SECTIONS,
) -> tuple[dict[str, list[tuple[float, int, float]]], list[str]]:
    """``vectors``: "model" (the engine encodes the store), "synthetic" (random vectors written
    before the engine rows) or "" (the engine rows are skipped). Runs on a copy of ``template``."""
    home = work / f"{template.name}-{checkout.name}"
    shutil.copytree(template, home)
    count = int(template.name.rsplit("-", 1)[1])
    env = {**os.environ, "MEMSELF_HOME": str(home), "HOME": str(work)}
    env.setdefault("MEMSELF_MODEL_CACHE", str(REPO_ROOT / ".cache" / "models"))
    cli = [checkout.python, "-m", "memself"]
    cwd = checkout.root or work
    hook = checkout.hook(EventKind.PROMPT_SUBMIT)
    samples: dict[str, list[tuple[float, int, float]]] = {}
    skipped: list[str] = []

    def add(name: str, sample: tuple[float, int, float]) -> None:
        samples.setdefault(name, []).append(sample)

    def stop() -> None:
        memself(env, "engine", "stop", checkout=checkout)

    if "outside" in sections:
        add(
            "project add, no duplicate sidecar yet",
            run([*cli, "project", "add", "初次追加的项目事实 0"], env, cwd=cwd),
        )
        for k in range(runs):
            outside_append(home, k)
            add(
                "project add, first after an outside change",
                run([*cli, "project", "add", f"外部追加之后的项目事实第 {k} 条"], env, cwd=cwd),
            )
    if "open" in sections:
        page = [*cli, "open", "--no-browser"]
        for k in range(runs):
            memself(env, "project", "add", f"打开页面之前追加的项目事实第 {k} 条", checkout=checkout)
            add("open, after an add", run(page, env, cwd=cwd))
            victim = ids[(k * 7919 + 13) % len(ids)]
            memself(env, "delete", victim, checkout=checkout)
            add("open, after a delete", run(page, env, cwd=cwd))
            add("open, nothing changed", run(page, env, cwd=cwd))
            memself(env, "restore", victim, checkout=checkout)
    for k in range(runs if "writes" in sections else 0):
        add("project add", run([*cli, "project", "add", f"新追加的项目事实第 {k} 条内容"], env, cwd=cwd))
        add(
            "project add, a duplicate",
            run([*cli, "project", "add", f"新追加的项目事实第 {k} 条内容。"], env, cwd=cwd),
        )
        add("rule add", run([*cli, "rule", "add", f"新追加的规则第 {k} 条内容"], env, cwd=cwd))
        victim = ids[(k * 7919) % len(ids)]
        add("delete", run([*cli, "delete", victim], env, cwd=cwd))
        add("restore", run([*cli, "restore", victim], env, cwd=cwd))
        add("list", run([*cli, "list"], env, cwd=cwd))
        add("list, nothing changed", run([*cli, "list"], env, cwd=cwd))
        (home / "decay-state.json").unlink(missing_ok=True)
        now = iso(datetime.now(timezone.utc))
        maintenance = [checkout.python, "-m", "memself.maintenance", str(home), "30", now]
        add("daily maintenance", run(maintenance, env, cwd=cwd))
    start = payload("start", work)
    for _ in range(runs if "hooks" in sections else 0):
        add("session start, engine cold", run(checkout.hook(EventKind.SESSION_START), env, start))
        stop()
        (home / "decay-state.json").unlink(missing_ok=True)
        add(
            "session start, engine cold, first of the day",
            run(checkout.hook(EventKind.SESSION_START), env, start),
        )
        stop()
    if vectors and "engine" in sections:
        if vectors == "model":
            memself(env, "engine", "start", "--timeout", "3600", checkout=checkout)
            wait_fully_indexed(home, 3600)
            stop()
        for _ in range(runs):
            add("engine ready", run([*cli, "engine", "start", "--timeout", "3600"], env, cwd=cwd))
            stop()
        memself(env, "engine", "start", "--timeout", "3600", checkout=checkout)
        try:
            # Synthetic vectors: nothing may be left to encode the moment the engine is ready (a
            # wrong model key would send every memory to the backlog).
            status = wait_fully_indexed(home, 60 if vectors == "model" else 0)
            print(
                f"{count} {checkout.name}: engine status: backlog {status.get('backlog')}, "
                f"indexed {status.get('indexed')} of {status.get('memories')} memories",
                file=sys.stderr,
                flush=True,
            )
            run(hook, env, payload("prompt", work))  # the first answer gives the day's rewards
            if last_hook_note(home) != "engine":
                raise SystemExit(f"{count}: the prompt hook was not answered by the engine")
            for _ in range(hook_runs):
                add("session start, warm engine", run(checkout.hook(EventKind.SESSION_START), env, start))
                add("prompt hook, warm engine", run(hook, env, payload("prompt", work)))
                if last_hook_note(home) != "engine":
                    raise SystemExit(f"{count}: the prompt hook was not answered by the engine")
        finally:
            stop()
    elif "engine" in sections:
        skipped = ["engine ready", "session start, warm engine", "prompt hook, warm engine"]
    shutil.rmtree(home, ignore_errors=True)
    return samples, skipped


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--hook-runs", type=int, default=0, help="warm-engine hook samples (default: --runs)")
    parser.add_argument("--encode-max", type=int, default=10000)
    parser.add_argument(
        "--synthetic-vectors",
        action="store_true",
        help="above --encode-max, index random unit vectors instead of skipping the engine rows",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="measure each checkout this many times per size, alternating which goes first, and"
        " take the medians over all rounds (the load of a shared machine drifts)",
    )
    parser.add_argument(
        "--checkouts",
        default="",
        help="NAME=PATH,NAME=PATH: measure each checkout (its own .venv) on the same stores, side by"
        " side, alternating per size; default: this checkout alone",
    )
    parser.add_argument(
        "--sections",
        default=",".join(sorted(SECTIONS)),
        help="which rows to measure: outside (adds after an outside append), open, writes (adds,"
        " delete, restore, list, maintenance), hooks (cold session start), engine",
    )
    args = parser.parse_args()
    sections = set(args.sections.split(","))
    if not sections <= SECTIONS:
        raise SystemExit(f"--sections: unknown {sorted(sections - SECTIONS)}")
    sizes = [int(s) for s in args.sizes.split(",")]
    checkouts = [
        Checkout(name, Path(path).resolve())
        for name, path in (pair.split("=", 1) for pair in args.checkouts.split(",") if pair)
    ] or [Checkout("", None)]
    work = Path(tempfile.mkdtemp(prefix="memself-bench-scale-"))
    samples: dict[tuple[int, str], dict[str, list[tuple[float, int, float]]]] = {}
    notes = []
    loads = [os.getloadavg()]
    try:
        for size in sizes:
            vectors = "model" if size <= args.encode_max else "synthetic" if args.synthetic_vectors else ""
            if "engine" not in sections:
                vectors = ""
            template, ids = prepare(size, vectors, work)
            for round_no in range(args.rounds):
                for checkout in checkouts if round_no % 2 == 0 else checkouts[::-1]:
                    got, skipped = measure(
                        template,
                        ids,
                        args.runs,
                        args.hook_runs or args.runs,
                        vectors,
                        work,
                        checkout,
                        sections,
                    )
                    for name, some in got.items():
                        samples.setdefault((size, checkout.name), {}).setdefault(name, []).extend(some)
                    done = f"{size} {checkout.name} round {round_no + 1}, load {os.getloadavg()[0]:.2f}"
                    print(done, file=sys.stderr, flush=True)
            shutil.rmtree(template, ignore_errors=True)
            if skipped:
                notes.append(f"{size}: not encoded, skipped {', '.join(skipped)}")
            if vectors == "synthetic":
                notes.append(
                    f"{size}: engine ready, session start and prompt hook with a warm engine measured on"
                    " synthetic vectors (random unit vectors of the model's dimension, written through"
                    " memself.index under the engine's model key; the engine had nothing to encode)"
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results = {
        column: {
            name: (
                statistics.median(x[0] for x in got),
                max(x[1] for x in got),
                statistics.median(x[2] for x in got),
            )
            for name, got in table.items()
        }
        for column, table in samples.items()
    }
    columns = list(results)
    rows = list(dict.fromkeys(name for table in results.values() for name in table))
    loads.append(os.getloadavg())
    load = " -> ".join("/".join(f"{x:.2f}" for x in one) for one in loads)
    print(
        f"rounds: {args.rounds}, runs: {args.runs}, warm-engine hook runs: {args.hook_runs or args.runs};"
        " cells: median wall ms (median CPU ms of the process) / largest max RSS MiB;"
        " load average (1/5/15 min)"
        f" at start -> end {load}; {os.cpu_count()} cores\n"
    )
    print(
        "| what | " + " | ".join(f"{s // 1000}k {c}: ms / MiB".replace("  ", " ") for s, c in columns) + " |"
    )
    print("|---|" + "---:|" * len(columns))
    for name in rows:
        cells = [
            f"{results[c][name][0]:.0f} ({results[c][name][2]:.0f}) / {results[c][name][1]}"
            if name in results[c]
            else "skipped"
            for c in columns
        ]
        print(f"| {name} | " + " | ".join(cells) + " |")
    for note in notes:
        print(f"\n{note}")


if __name__ == "__main__":
    main()
