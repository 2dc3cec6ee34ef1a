"""What the engine hosts: a service object, chosen by a ``module:factory`` spec.

The engine owns the socket, the lifecycle and the ops ``ping``, ``status`` and ``stop``; every
other op goes to the service. Whoever runs the engine names the service (the product's is in
``memself.warm``, which this package never imports); tests host a small one through
``MEMSELF_ENGINE_SERVICE``.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from memself.errors import MemselfError
from memself.paths import DataPaths

# For tests only: the suite cannot load the real model in every engine it starts and stops.
SERVICE_ENV = "MEMSELF_ENGINE_SERVICE"


@runtime_checkable
class EngineService(Protocol):
    """The contract between the engine and what it serves.

    - The factory (``make_service(paths) -> EngineService``) must be cheap: the engine listens
      only after it returns. Heavy work (load the model, the index and the tables) goes in
      ``warm_up``, which runs in a background thread while ``ping`` and ``status`` already answer.
    - ``handle`` is called only after ``warm_up`` returned, one call at a time (the engine holds a
      lock around ``handle`` and ``reload``), from a connection thread. It returns a JSON-able
      dict; raising a ``MemselfError`` sends its (Chinese) message to the client as
      "service-error"; an unknown op should raise ``memself.errors.InvalidInput``.
    - ``reload`` is called, under the same lock, before the first request that sees a changed
      data file (``rule.jsonl``, ``project.jsonl``, ``config.json``, the index directory).
      ``reload`` may also follow the service's own writes (an index it saved), so it should be
      incremental (content hashes) rather than start from scratch.
    - Optional: ``describe() -> dict`` adds service details to the ``status`` op;
      ``progress() -> dict`` (lock-free) the part of them still told while a request holds the lock;
      ``watched_paths() -> list[Path]`` replaces the default watched files; ``close()`` runs
      when the engine exits.
    """

    def warm_up(self) -> None: ...

    def handle(self, op: str, payload: dict[str, Any]) -> dict[str, Any]: ...

    def reload(self) -> None: ...


def watched_files(paths: DataPaths) -> list[Path]:
    """The data files whose change makes the engine call ``reload``."""
    return [paths.group_file("rule"), paths.group_file("project"), paths.config, paths.index_dir]


def service_spec(default: str) -> str:
    """The ``module:factory`` spec of the service to host (the env override exists for tests)."""
    return os.environ.get(SERVICE_ENV, "").strip() or default


def load_service(paths: DataPaths, spec: str) -> EngineService:
    """Import ``module:factory`` (or the tests' override) and call ``factory(paths)``."""
    spec = service_spec(spec)
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise MemselfError(f"召回引擎的服务配置无效：{spec}（应为 模块:函数）")
    factory = getattr(importlib.import_module(module_name), attr)
    service = factory(paths)
    missing = [name for name in ("warm_up", "handle", "reload") if not callable(getattr(service, name, None))]
    if missing or not isinstance(service, EngineService):
        raise MemselfError(f"召回引擎的服务缺少方法：{', '.join(missing)}")
    return service
