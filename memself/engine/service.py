"""The recall service the warm engine hosts: the model, the background mean and the vector index.

Ops:
- ``recall`` {text, now}: per-group gated recall of active memories, rewarded through the store.
- ``nearest`` {text, k}: the k nearest active memories, ungated, no rewards (the judge's dedup).
- ``hook`` {event, now}: a whole session-start or prompt hook, run here so that the hook process
  imports almost nothing (see ``memself.hookrun``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from memself.config import Config, load_config
from memself.errors import InvalidInput
from memself.logs import log
from memself.paths import DataPaths
from memself.records import GROUPS, Memory
from memself.store import MemoryStore

OP_RECALL = "recall"
OP_NEAREST = "nearest"
OP_HOOK = "hook"


def make_service(paths: DataPaths) -> RecallService:
    return RecallService(paths)


class RecallService:
    def __init__(self, paths: DataPaths) -> None:
        self.paths = paths
        self.store = MemoryStore(paths)
        self.model = ""
        self.encoder: Any = None
        self.memory_encoder: Any = None
        self.recaller: Any = None
        self.index: Any = None
        self.memories: dict[str, Memory] = {}

    # ----- lifecycle (called by the engine) -----

    def warm_up(self) -> None:
        self._load_model(load_config(self.paths))
        self.reload()

    def _load_model(self, config: Config) -> None:
        from memself.encoder import load_encoder
        from memself.memory_encoder import memory_side
        from memself.recall import load_recaller
        from memself.vector_index import VectorIndex

        self.encoder = load_encoder(config.model)
        self.memory_encoder = memory_side(self.encoder)
        self.recaller = load_recaller(self.encoder, config.model)
        self.index = VectorIndex.for_paths(self.paths)
        self.model = config.model

    def reload(self) -> None:
        """Re-read memories; encode new or changed ones (a model change re-encodes everything)."""
        config = load_config(self.paths)
        if config.model != self.model:
            self._load_model(config)
        memories = self.store.all()
        self.memories = {m.id: m for m in memories}
        result = self.index.sync(memories, self.memory_encoder)
        if result.failed:
            log(self.paths, "index-encode-failed", count=len(result.failed))

    def describe(self) -> dict[str, Any]:
        return {"model": self.model, "memories": len(self.memories),
                "indexed": len(self.index) if self.index is not None else 0}

    # ----- ops -----

    def handle(self, op: str, payload: dict[str, Any]) -> dict[str, Any]:
        if op == OP_RECALL:
            return self.recall(str(payload.get("text", "")), _now(payload))
        if op == OP_NEAREST:
            return {"items": [{"id": m.id, "score": s} for m, s in
                              self.nearest(str(payload.get("text", "")), int(payload.get("k", 3)))]}
        if op == OP_HOOK:
            return self.hook(payload)
        raise InvalidInput(f"召回引擎不支持的操作「{op}」")

    def _indexed(self) -> tuple[list[Memory], list[int]]:
        """Memories that have a vector, with their rows (a memory not yet encoded waits a turn)."""
        memories = list(self.memories.values())
        rows = self.index.rows([m.id for m in memories])
        kept = [(m, int(r)) for m, r in zip(memories, rows, strict=True) if r >= 0]
        return [m for m, _ in kept], [r for _, r in kept]

    def nearest(self, text: str, k: int) -> list[tuple[Memory, float]]:
        """The k nearest active memories, ungated and unrewarded (the judge's dedup)."""
        memories, rows = self._indexed()
        return self.recaller.top_k(text, memories, self.index.matrix, k, rows,
                                   matrix_key=self.index.generation)

    def recall(self, text: str, now: datetime) -> dict[str, Any]:
        """Gated per-group recall; the hits are rewarded (once per memory per day)."""
        from memself.models import resolve_model
        from memself.recall import gate_params

        config = load_config(self.paths)
        memories, rows = self._indexed()
        params = gate_params(config, resolve_model(config.model))
        result = self.recaller.recall(text, memories, self.index.matrix, params, rows,
                                      matrix_key=self.index.generation).to_json()
        gains = self.store.reward_recall([h["id"] for g in GROUPS for h in result[g]], now)
        for hits in result.values():
            for hit in hits:
                hit["confidence"] = round(hit["confidence"] + gains.get(hit["id"], 0.0), 10)
        return result

    def hook(self, payload: dict[str, Any]) -> dict[str, Any]:
        from memself.hookcore import handle
        from memself.hosts.base import EventKind, HookEvent

        raw = dict(payload.get("event") or {})
        raw["kind"] = EventKind(raw.get("kind", "unknown"))
        event = HookEvent(**raw)
        reply = handle(event, _now(payload), self.paths,
                       recall=lambda text, now: self.recall(text, now), in_engine=True)
        return reply._asdict()


def _now(payload: dict[str, Any]) -> datetime:
    raw = payload.get("now")
    if isinstance(raw, str):
        try:
            parsed = datetime.fromisoformat(raw.replace("Z", "+00:00"))
            if parsed.tzinfo is not None:
                return parsed
        except ValueError:
            pass
    raise InvalidInput("召回请求缺少带时区的 now")
