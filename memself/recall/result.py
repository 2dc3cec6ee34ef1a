"""What one recall returns: each group's hits and the gate's explanation.

``to_json`` is what a hook injects and rewards; ``to_detail`` / ``from_detail`` carry the whole
result, explanation included, from the engine to ``memself recall``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from memself.store.records import GROUPS


@dataclass(frozen=True)
class Hit:
    """One recalled memory: ``score`` = ``dense`` + ``lexical`` - ``penalty`` (the general-question
    penalty); ``offset``: how far above its group's floor it had to score (scored with its
    appliesWhen views); ``via``: the request that scored best, "" when the memory's text did."""

    id: str
    text: str
    score: float
    confidence: float
    dense: float
    lexical: float
    penalty: float = 0.0
    offset: float = 0.0
    via: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "text": self.text,
            "score": round(self.score, 4),
            "confidence": self.confidence,
        }


@dataclass(frozen=True)
class GroupRecall:
    """One group's hits and the gate's explanation (for ``memself recall``)."""

    group: str
    hits: list[Hit]
    reason: str
    line: float | None
    top1: float | None
    floor: float
    margin: float
    candidates: int


@dataclass(frozen=True)
class RecallResult:
    text: str
    groups: dict[str, GroupRecall]

    @property
    def hit_ids(self) -> list[str]:
        return [h.id for g in GROUPS for h in self.groups[g].hits]

    def to_json(self) -> dict[str, list[dict[str, Any]]]:
        """``{"rule": [{"id","text","score","confidence"}...], "project": [...]}``."""
        return {g: [h.to_json() for h in self.groups[g].hits] for g in GROUPS}

    def with_team(self, team: RecallResult, top_k: int) -> RecallResult:
        """This result with a repository's team memories (``team``, recalled over their own
        pool and gated on their own) listed among the hits by score, as the engine's recall
        merges them."""
        groups: dict[str, GroupRecall] = {}
        for group in GROUPS:
            mine, theirs = self.groups[group], team.groups[group]
            hits = sorted([*mine.hits, *theirs.hits], key=lambda h: -h.score)[: max(top_k, len(mine.hits))]
            if not theirs.hits:
                groups[group] = replace(mine, candidates=mine.candidates + theirs.candidates)
                continue
            # The team's group may pass where the user's did not: its explanation then stands.
            base = mine if mine.hits else theirs
            groups[group] = replace(base, hits=hits, candidates=mine.candidates + theirs.candidates)
        return RecallResult(self.text, groups)

    def to_detail(self) -> dict[str, Any]:
        """Everything, the gate's explanation included: what the engine sends ``memself recall``."""
        return {"text": self.text, "groups": {g: asdict(self.groups[g]) for g in GROUPS}}

    @classmethod
    def from_detail(cls, data: dict[str, Any]) -> RecallResult:
        groups: dict[str, GroupRecall] = {}
        for group in GROUPS:
            raw = dict(data["groups"][group])
            raw["hits"] = [Hit(**hit) for hit in raw["hits"]]
            groups[group] = GroupRecall(**raw)
        return cls(str(data["text"]), groups)
