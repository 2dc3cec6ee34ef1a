"""Where the warm prompt hook's milliseconds go, 1k memories, the offline model.

    .venv/bin/python bench/bench_hook_breakdown.py [--runs 40]

Three views of the same prompt (a Claude Code ``UserPromptSubmit``), medians over ``--runs``,
rows of each view interleaved run by run so load drifts hit them alike:

1. The hook process, as a host runs it (process start to exit): ``python -I -S -c pass`` (the
   interpreter), the same importing what ``hooks/entry.py`` imports before it connects (the
   deadline, the stdin reader, the fast path and the engine transport), and the whole hook
   against a warm engine. The difference of the last two is the engine's share seen from the
   process.
2. The client half, in this process, step by step as ``memself.hook.process.forward`` runs it:
   building the request frame, connecting, the exchange (sending the frame, the engine serving
   it, reading the reply), parsing the reply, the ACK (and close).
3. The engine's service time, taken apart on an in-process ``RecallService`` of the same data
   directory (the code the engine runs, timed around its pieces): tokenizing, the model's forward
   pass, the rest of the prompt's encode (padding, pooling, normalising, the recall space),
   scoring and gating, and everything else of the hook (parsing the payload, the input filter,
   the store's reads for rewards, rendering the injected block, the host's JSON).

The exchange of view 2 minus the service of view 3 is the engine's framing and dispatch. A
temporary data directory; nothing of the user's is touched.
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_hooks import FACT, memself_cli, synthetic_memories, write_group  # noqa: E402

ENTRY = REPO_ROOT / "hooks" / "entry.py"
PROMPT = "支付模块的灰度开关配置在哪里，上线前要检查什么"
# What hooks/entry.py imports before it connects (memself.hook.process pulls in the transport).
IMPORTS = (
    f"import sys; sys.path.insert(0, {str(REPO_ROOT)!r}); "
    "import memself.hook.deadline, memself.hook.inputs, memself.hook.process"
)


def timed_run(argv: list[str], stdin: bytes, env: dict[str, str]) -> float:
    began = time.perf_counter()
    done = subprocess.run(argv, input=stdin, capture_output=True, env=env, check=False)
    took = (time.perf_counter() - began) * 1000
    if done.returncode != 0:
        raise SystemExit(f"{argv} exited {done.returncode}: {done.stderr[-400:]!r}")
    return took


def wait_indexed(env: dict[str, str], home: Path, count: int) -> None:
    from memself.engine.client import engine_status
    from memself.paths import DataPaths

    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        status = engine_status(DataPaths(home), 5.0) or {}
        service = status.get("service") or {}
        if service.get("indexed") == count and service.get("backlog") is None:
            return
        time.sleep(0.5)
    raise SystemExit("the engine never indexed every memory")


class Stopwatch:
    """Milliseconds spent in wrapped callables, per name, for the current run."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.spent[name] = self.spent.get(name, 0.0) + (time.perf_counter() - began) * 1000

        return timed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="memself-bench-breakdown-"))
    home = work / "data"
    home.mkdir(mode=0o700)
    os.environ.update(MEMSELF_HOME=str(home), HOME=str(work))
    os.environ.setdefault("MEMSELF_MODEL_CACHE", str(REPO_ROOT / ".cache" / "models"))
    os.environ.pop("MEMSELF_ENGINE_SERVICE", None)
    env = dict(os.environ)
    write_group(home, "rule", synthetic_memories(500, "rule"))
    write_group(home, "project", synthetic_memories(499, "project"))
    memself_cli(env, "config", "model", "multilingual-e5-small")
    memself_cli(env, "project", "add", FACT)
    payload = json.dumps(
        {
            "hook_event_name": "UserPromptSubmit",
            "session_id": "bench-session",
            "prompt_id": "p1",
            "cwd": str(work),
            "prompt": PROMPT,
        },
        ensure_ascii=False,
    ).encode()
    hook = [sys.executable, "-I", "-S", str(ENTRY), "--agent", "claude", "--event", "prompt_submit"]
    hook += ["--timeout", "30"]

    from memself.engine import transport
    from memself.engine.location import locate
    from memself.hook import process
    from memself.paths import DataPaths
    from memself.warm.service import RecallService, run_forwarded

    process_rows: dict[str, list[float]] = {"interpreter": [], "imports": [], "hook": []}
    client_rows: dict[str, list[float]] = {
        k: [] for k in ("request frame", "connect", "exchange", "parse reply", "ack and close")
    }
    service_rows: dict[str, list[float]] = {
        k: [] for k in ("tokenize", "model forward", "rest of encode", "scoring", "rest of hook", "service")
    }
    try:
        memself_cli(env, "engine", "start", "--timeout", "600")
        wait_indexed(env, home, 1000)
        for _ in range(3):  # the day's rewards and the first answers' one-time work
            timed_run(hook, payload, env)

        service = RecallService(DataPaths(home))
        service.warm_up()
        watch = Stopwatch()
        encoder, recaller = service.encoder, service.recaller
        assert encoder is not None and recaller is not None
        encoder.tokenize = watch.wrap("tokenize", encoder.tokenize)  # type: ignore[method-assign]
        encoder.forward = watch.wrap("model forward", encoder.forward)  # type: ignore[method-assign]
        encoder.encode_queries = watch.wrap("encode", encoder.encode_queries)  # type: ignore[method-assign]
        recaller.recall = watch.wrap("recall", recaller.recall)  # type: ignore[method-assign]
        forwarded = {
            "host": "claude",
            "stdinHex": payload.hex(),
            "env": {},
            "home": str(work),
            "started": 0.0,
            "utcoffset": 0,
            "zone": "UTC",
        }

        for _ in range(args.runs):
            bare = [sys.executable, "-I", "-S", "-c"]
            process_rows["interpreter"].append(timed_run([*bare, "pass"], b"", env))
            process_rows["imports"].append(timed_run([*bare, IMPORTS], b"", env))
            process_rows["hook"].append(timed_run(hook, payload, env))

            marks = [time.perf_counter()]
            started = time.time()
            body = process.request_body("claude", payload, started, 0.0)
            marks.append(time.perf_counter())
            sock, _token = transport.connect(locate(str(home)), time.monotonic() + 30)
            marks.append(time.perf_counter())
            reply = transport.exchange(sock, body, time.monotonic() + 30)
            marks.append(time.perf_counter())
            outcome = process.parse_reply(reply)
            marks.append(time.perf_counter())
            if outcome[0] != "out":
                raise SystemExit(f"the engine answered {outcome!r}")
            process._answered_on.append(sock)
            process._close_answered(True)
            marks.append(time.perf_counter())
            for name, a, b in zip(client_rows, marks, marks[1:], strict=False):
                client_rows[name].append((b - a) * 1000)

            watch.spent = {}
            forwarded["started"] = time.time()
            began = time.perf_counter()
            with service._lock:
                run_forwarded(forwarded, service.paths, service.hook_core)
            total = (time.perf_counter() - began) * 1000
            spent = watch.spent
            scoring = spent.get("recall", 0.0) - spent.get("encode", 0.0)
            service_rows["tokenize"].append(spent.get("tokenize", 0.0))
            service_rows["model forward"].append(spent.get("model forward", 0.0))
            service_rows["rest of encode"].append(
                spent.get("encode", 0.0) - spent.get("tokenize", 0.0) - spent.get("model forward", 0.0)
            )
            service_rows["scoring"].append(scoring)
            service_rows["rest of hook"].append(total - spent.get("recall", 0.0))
            service_rows["service"].append(total)
        service.close()
    finally:
        subprocess.run(
            [sys.executable, "-m", "memself", "engine", "stop"], env=env, capture_output=True, check=False
        )
        shutil.rmtree(work, ignore_errors=True)

    def p50(values: list[float]) -> float:
        return statistics.median(values)

    print(f"runs: {args.runs}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores\n")
    print("| the hook process | p50 ms |")
    print("|---|---:|")
    interp, imports, whole = (p50(process_rows[k]) for k in ("interpreter", "imports", "hook"))
    print(f"| `python -I -S -c pass` | {interp:.1f} |")
    print(f"| + the hook's imports | {imports - interp:+.1f} |")
    print(f"| + the engine's answer and the rest (whole hook {whole:.1f}) | {whole - imports:+.1f} |")
    print("\n| the client half, in process | p50 ms |")
    print("|---|---:|")
    for name, values in client_rows.items():
        print(f"| {name} | {p50(values):.2f} |")
    print("\n| the engine's service, in process | p50 ms |")
    print("|---|---:|")
    for name, values in service_rows.items():
        print(f"| {name} | {p50(values):.2f} |")
    framing = p50(client_rows["exchange"]) - p50(service_rows["service"])
    print(f"\nexchange minus service (the engine's framing and dispatch): {framing:+.2f} ms")


if __name__ == "__main__":
    main()
