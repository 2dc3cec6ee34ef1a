"""The engine of a given checkout, run as its client runs it, with the time of each start-up
phase recorded from outside the product code (``bench_engine_start.py`` runs it).

    <checkout>/.venv/bin/python [-I] engine_start_probe.py ROOT EVENTS_FILE serve --data-dir DIR
    <checkout>/.venv/bin/python engine_start_probe.py --cli ROOT EVENTS_DIR engine start ...

``ROOT`` is the checkout (put first on ``sys.path``, as its launcher does); the rest is the
engine's own command line. Functions of the engine are wrapped by name where the checkout has
them, and the heavy third-party packages' imports are timed by a meta-path finder; the
``(label, start, end)`` list (``time.monotonic``, comparable across processes here) is written to
``EVENTS_FILE`` when the warm-up ends, which is when the engine answers "ready".
With ``--cli`` it runs the ``memself`` command instead (as ``python -m memself`` would), timing
its imports, its requests to the engine and the spawn, and makes the engine it spawns (same
interpreter flags, same handed-over lock) this probe too: ``EVENTS_DIR/cli.json`` and
``EVENTS_DIR/engine.json``.
Standard library only: it runs under either checkout's interpreter.
"""

import time

T_MAIN = time.monotonic()

import functools  # noqa: E402
import importlib  # noqa: E402
import importlib.abc  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402

EVENTS: list[tuple[str, float, float]] = [("probe main", T_MAIN, T_MAIN)]
_EVENTS_LOCK = threading.Lock()
WRAPPED_MODULES = (
    "memself.engine.base",
    "memself.engine.heap",
    "memself.engine.service",
    "memself.encoder",
    "memself.model.runtime",
    "memself.model.row_table",
    "memself.recall.scoring",
    "memself.index.sync",
    "memself.recall.pool",
    "memself.lexical",
    "memself.textfilter",
)
TIMED_IMPORTS = ("numpy", "onnxruntime", "tokenizers", "rjieba", "ctypes", "click")


def _record(label: str, start: float, end: float) -> None:
    with _EVENTS_LOCK:
        EVENTS.append((label, start, end))


class _TimedImports(importlib.abc.MetaPathFinder):
    """Times the first import of each package in ``TIMED_IMPORTS`` (its own and its imports')."""

    def find_spec(self, name, path, target=None):  # type: ignore[no-untyped-def]
        if name not in TIMED_IMPORTS:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                original = spec.loader.exec_module

                def exec_module(module, _original=original, _name=name):  # type: ignore[no-untyped-def]
                    start = time.monotonic()
                    try:
                        _original(module)
                    finally:
                        _record(f"import {_name}", start, time.monotonic())

                spec.loader.exec_module = exec_module
                return spec
            if spec is not None:
                return spec
        return None


def _wrap(owner: object, attr: str, label: str, after=None) -> None:  # type: ignore[no-untyped-def]
    original = getattr(owner, attr, None)
    if original is None:
        return

    @functools.wraps(original)
    def timed(*args, **kwargs):  # type: ignore[no-untyped-def]
        start = time.monotonic()
        try:
            return original(*args, **kwargs)
        finally:
            _record(label, start, time.monotonic())
            if after is not None:
                after()

    setattr(owner, attr, timed)


# Where the package's reorganisation moved a module: a checkout from before it has the old name.
MOVED = {
    "memself.engine.service": "memself.warm.service",
    "memself.engine.__main__": "memself.warm.__main__",
    "memself.encoder": "memself.model.encoder",
    "memself.lexical": "memself.recall.lexical",
    "memself.textfilter": "memself.text.input_filter",
}


def _module(name: str) -> object | None:
    for candidate in (MOVED.get(name), name):
        if candidate is None:
            continue
        try:
            return importlib.import_module(candidate)
        except ImportError:
            continue
    return None


def _dump(path: str) -> None:
    with _EVENTS_LOCK:
        events = list(EVENTS)
    modules = sorted(sys.modules)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump({"events": events, "modules": modules}, handle)


def main() -> None:
    root, events_file = sys.argv[1], sys.argv[2]
    sys.path.insert(0, root)
    sys.meta_path.insert(0, _TimedImports())
    start = time.monotonic()
    import os

    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the engine's __main__ does first
    import memself.engine.server as server

    _record("import engine server modules", start, time.monotonic())

    start = time.monotonic()
    for name in WRAPPED_MODULES:
        _module(name)
    _record("import the modules wrapped below (early, for the probe)", start, time.monotonic())
    engine_base = _module("memself.engine.base")
    _wrap(engine_base, "load_service", "load_service (service module)")
    _wrap(_module("memself.engine.heap"), "limit_arenas", "limit_arenas")
    _wrap(server.children, "reap_here", "children.reap_here")
    _wrap(server.EngineServer, "__init__", "EngineServer() (location, fingerprint)")
    _wrap(server.EngineServer, "acquire", "lock: acquire")
    _wrap(server.EngineServer, "start", "listen and start warm-up thread")
    _wrap(server.EngineServer, "_warm_up", "warm-up (to ready)", after=lambda: _dump(events_file))
    service = _module("memself.engine.service")
    _wrap(service.RecallService, "_load_model", "warm-up: load model + space + index")
    _wrap(service.RecallService, "reload", "warm-up: reload (store, index, pool)")
    _wrap(service.RecallService, "_prime", "warm-up: prime")
    _wrap(service.CachedReadStore, "all", "reload: store.all")
    encoder = _module("memself.encoder")
    _wrap(encoder, "load_encoder", "model: load_encoder")
    runtime = _module("memself.model.runtime")
    _wrap(runtime, "load_tokenizer", "model: load_tokenizer")
    _wrap(runtime, "find_prepared", "model: find_prepared")
    _wrap(runtime.LeanEncoder, "__init__", "model: LeanEncoder()")
    _wrap(runtime.LeanEncoder, "encode_queries", "encode_queries")
    _wrap(_module("memself.model.row_table"), "RowTable", "model: RowTable()")
    scoring = _module("memself.recall.scoring")
    _wrap(scoring, "load_recaller", "model: load_recaller")
    _wrap(scoring, "load_space", "model: load_space")
    _wrap(scoring.Recaller, "score", "recaller.score")
    sync = _module("memself.index.sync")
    _wrap(sync.VectorIndex, "plan", "reload: index.plan")
    _wrap(sync.VectorIndex, "commit", "reload: index.commit")
    pool = _module("memself.recall.pool")
    _wrap(pool, "indexed_pool", "reload: indexed_pool")
    lexical = _module("memself.lexical")
    _wrap(lexical, "warm_up", "prime: lexical.warm_up")
    textfilter = _module("memself.textfilter")
    _wrap(textfilter, "classify_input", "prime: classify_input")

    engine_main = _module("memself.engine.__main__")
    sys.argv = ["memself.engine", *sys.argv[3:]]
    sys.exit(engine_main.main())


def cli_main() -> None:
    root, events_dir = sys.argv[2], sys.argv[3]
    sys.path.insert(0, root)
    start = time.monotonic()
    import memself.cli  # noqa: F401

    _record("cli: import memself.cli", start, time.monotonic())
    import os
    import runpy

    import memself.engine.client as client

    spawn_posix = client._spawn_posix

    def probed_spawn(command, env, keep_fd):  # type: ignore[no-untyped-def]
        # The engine's own arguments start at "serve"; its interpreter flags stay as they were.
        serve = command.index("serve")
        flags = ["-I"] if "-I" in command[:serve] else []
        events = os.path.join(events_dir, "engine.json")
        probed = [command[0], *flags, os.path.abspath(__file__), root, events, *command[serve:]]
        now = time.monotonic()
        _record("cli: spawn", now, now)
        return spawn_posix(probed, env, keep_fd)

    client._spawn_posix = probed_spawn
    request = client.EngineClient.request

    def probed_request(self, op, *args, **kwargs):  # type: ignore[no-untyped-def]
        begun = time.monotonic()
        try:
            result = request(self, op, *args, **kwargs)
        except Exception:
            _record(f"cli: request {op} (failed)", begun, time.monotonic())
            raise
        ready = isinstance(result, dict) and result.get("ready")
        _record(f"cli: request {op}" + (" (ready)" if ready else ""), begun, time.monotonic())
        return result

    client.EngineClient.request = probed_request
    sys.argv = ["memself", *sys.argv[4:]]
    try:
        runpy.run_module("memself", run_name="__main__", alter_sys=True)
    except SystemExit:
        pass
    finally:
        now = time.monotonic()
        _record("cli: end", now, now)
        _dump(os.path.join(events_dir, "cli.json"))


if __name__ == "__main__":
    if sys.argv[1] == "--cli":
        cli_main()
    else:
        main()
