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
        self.background: Any = None
        self.index: Any = None
        self.memories: dict[str, Memory] = {}

    # ----- lifecycle (called by the engine) -----

    def warm_up(self) -> None:
        self._load_model(load_config(self.paths))
        self.reload()

    def _load_model(self, config: Config) -> None:
        from memself.background import load_background
        from memself.encoder import load_encoder
        from memself.vector_index import VectorIndex

        self.encoder = load_encoder(config.model)
        self.background = load_background(self.encoder)
        self.index = VectorIndex.for_paths(self.paths)
        self.model = config.model

    def reload(self) -> None:
        """Re-read memories; encode new or changed ones (a model change re-encodes everything)."""
        config = load_config(self.paths)
        if config.model != self.model:
            self._load_model(config)
        memories = self.store.all()
        self.memories = {m.id: m for m in memories}
        result = self.index.sync(memories, self.encoder)
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

    def _query_scores(self, text: str) -> dict[str, float]:
        query = self.background.centre(self.encoder.encode_queries([text])[0])
        scores = self.index.scores(query, self.background.mean)
        return dict(zip(self.index.ids, (float(s) for s in scores), strict=True))

    def ranked(self, text: str, group: str | None = None) -> list[tuple[Memory, float]]:
        """Active memories (of one group, or all) by centred cosine, best first."""
        scores = self._query_scores(text)
        pool = [(m, scores[m.id]) for m in self.memories.values()
                if m.active and m.id in scores and (group is None or m.category == group)]
        return sorted(pool, key=lambda pair: pair[1], reverse=True)

    def nearest(self, text: str, k: int) -> list[tuple[Memory, float]]:
        return self.ranked(text)[:max(k, 0)]

    def recall(self, text: str, now: datetime) -> dict[str, Any]:
        from memself.recall import gate

        config = load_config(self.paths)
        floors = _floors(config)
        scores = self._query_scores(text)
        result: dict[str, list[dict[str, Any]]] = {}
        for group in GROUPS:
            pool = sorted(((m, scores[m.id]) for m in self.memories.values()
                           if m.category == group and m.active and m.id in scores),
                          key=lambda pair: pair[1], reverse=True)
            kept = gate(pool, floors[group], config.recallMinMargin, config.recallTopK)
            result[group] = [{"id": m.id, "text": m.text, "score": round(s, 4),
                              "confidence": m.confidence} for m, s in kept]
        hit_ids = [h["id"] for hits in result.values() for h in hits]
        gains = self.store.reward_recall(hit_ids, now)
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


def _floors(config: Config) -> dict[str, float]:
    from memself.models import resolve_model

    settings = resolve_model(config.model)
    rule = config.recallMinScore if config.is_set("recallMinScore") else settings.rule_floor
    project = (config.recallMinScoreProject if config.is_set("recallMinScoreProject")
               else settings.project_floor)
    return {"rule": float(rule), "project": float(project)}


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
