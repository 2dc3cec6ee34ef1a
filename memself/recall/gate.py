"""The gate: which of one group's ranked memories a prompt recalls, exactly as the original.

Separately for ``rule`` and ``project`` (the original's section 2.3): rank; floor >= 0 and
top1 < floor -> nothing; margin >= 0 and top1 - top2 < margin -> nothing; floor and margin both
off -> plain top-k; else keep ``score >= max(floor, 0.6 * top1)`` and cut to top-k. A memory
scored with its appliesWhen views must also reach ``floor + extra`` (its group's view offset).

Pure: scores in, kept pairs out. The numbers come from config (``memself.recall.lines.gate_params``);
the scores from
``memself.recall.scoring``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from memself.model.catalog import ModelSettings

T = TypeVar("T")

RELATIVE = 0.6  # the original's relative line: a hit must reach 0.6 x its group's top1


@dataclass(frozen=True)
class GateParams:
    """The gate's numbers from config (floors already resolved against the model's defaults)."""

    floors: dict[str, float]
    margin: float = -1.0
    top_k: int = 3


def shipped_floors(model_settings: ModelSettings) -> dict[str, float] | None:
    """The floors calibrated for this model and shipped with memself: its recall calibration file,
    else the model table's floors when they are the model's own calibration (the original's for
    bge-base-zh); None for a model without a calibration."""
    from memself.recall.calibration import load_calibration

    calibration = load_calibration(model_settings.model_id)
    if calibration is not None:
        return dict(calibration.floors)
    if model_settings.floors_calibrated:
        return {"rule": model_settings.rule_floor, "project": model_settings.project_floor}
    return None


def default_floors(model_settings: ModelSettings) -> dict[str, float]:
    """The model's calibrated floors (its recall calibration file), else the model table's."""
    shipped = shipped_floors(model_settings)
    if shipped is not None:
        return shipped
    return {"rule": model_settings.rule_floor, "project": model_settings.project_floor}


@dataclass(frozen=True)
class GateOutcome(Generic[T]):
    """What one group's gate did: the kept pairs and the line they had to pass.

    ``reason``: ``empty`` (no candidates), ``below-floor`` (top1 under the floor), ``margin``
    (top1 not far enough ahead of top2), ``top-k`` (floor and margin off: plain top-k), ``line``
    (kept what reached ``line``).
    """

    kept: list[tuple[T, float]]
    reason: str
    line: float | None
    top1: float | None
    floor: float
    margin: float


def gate_explained(
    pool: Sequence[tuple[T, float]],
    floor: float,
    margin: float,
    top_k: int,
    extra: Callable[[T], float] | None = None,
) -> GateOutcome[T]:
    """The original's gate over ``(item, score)`` pairs of one group; see the module doc.

    ``extra(item)``: how much higher than the floor that item must score (a memory scored with its
    appliesWhen views: ``memself.recall.scoring``); with none, or with the floor off, the gate is
    exactly the original's. The relative line stays ``0.6 x top1`` for every item.
    """
    ranked = sorted(pool, key=lambda pair: pair[1], reverse=True)
    k = max(int(top_k), 0)
    if not ranked:
        return GateOutcome([], "empty", None, None, floor, margin)
    top1 = ranked[0][1]
    raised = extra if extra is not None and floor >= 0 else None
    if floor >= 0 and top1 < floor:
        return GateOutcome([], "below-floor", floor, top1, floor, margin)
    if margin >= 0:
        top2 = ranked[1][1] if len(ranked) > 1 else 0.0
        if top1 - top2 < margin:
            return GateOutcome([], "margin", None, top1, floor, margin)
    if floor < 0 and margin < 0:
        return GateOutcome(ranked[:k], "top-k", None, top1, floor, margin)
    line = max(floor, RELATIVE * top1) if floor >= 0 else RELATIVE * top1
    if raised is None:
        kept = [pair for pair in ranked[:k] if pair[1] >= line]
        return GateOutcome(kept, "line", line, top1, floor, margin)
    kept = [pair for pair in ranked[:k] if pair[1] >= max(line, floor + raised(pair[0]))]
    if not kept and all(pair[1] < floor + raised(pair[0]) for pair in ranked[:k]):
        return GateOutcome([], "below-floor", floor, top1, floor, margin)
    return GateOutcome(kept, "line", line, top1, floor, margin)


def gate(
    pool: Sequence[tuple[T, float]],
    floor: float,
    margin: float,
    top_k: int,
    extra: Callable[[T], float] | None = None,
) -> list[tuple[T, float]]:
    """The kept ``(item, score)`` pairs of one group, best first."""
    return gate_explained(pool, floor, margin, top_k, extra).kept
