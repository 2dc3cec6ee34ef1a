"""The recall line (floor) in effect for each group and model, and where it comes from.

A user's line for the model (``recallLines``), else, for bge-base-zh only, the original's flat
key, else the model's shipped calibration, else the generic default. Read by the gate, the
config listings, ``memory_config`` and doctor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memself.config import (
    LINE_KEYS,
    LINE_SOURCES,
    ORIGINAL_LINES_MODEL,
    Config,
    load_config,
)
from memself.errors import MemselfError
from memself.model.catalog import ModelSettings, resolve_model
from memself.paths import DataPaths
from memself.recall.gate import GateParams, default_floors, shipped_floors


@dataclass(frozen=True)
class RecallLine:
    value: float  # -1 (any negative) switches the floor off
    source: str  # a key of LINE_SOURCES


def recall_lines(config: Config, settings: ModelSettings) -> dict[str, RecallLine]:
    """The floor of each group for ``settings``' model, and where it comes from: the user's line
    for this model, else (bge-base-zh only) the original's flat key, else the model's shipped
    calibration, else the generic default."""
    shipped = shipped_floors(settings)
    fallback = default_floors(settings)
    mine = config.lines.get(settings.model_id, {})
    out: dict[str, RecallLine] = {}
    for key, group in LINE_KEYS.items():
        if group in mine:
            out[group] = RecallLine(mine[group], "user")
        elif settings.model_id == ORIGINAL_LINES_MODEL and config.is_set(key):
            out[group] = RecallLine(float(config.values[key]), "original")
        elif shipped is not None:
            out[group] = RecallLine(shipped[group], "shipped")
        else:
            out[group] = RecallLine(fallback[group], "default")
    return out


def line_in_effect(config: Config, name: str) -> tuple[float, str] | None:
    """For a recall floor key: the value in effect for the configured model and a note naming the
    model and where the value comes from; None for other keys or a model that cannot be resolved."""
    if name not in LINE_KEYS:
        return None
    try:
        line = recall_lines(config, resolve_model(config.model))[LINE_KEYS[name]]
    except MemselfError:
        return None
    return line.value, f"{config.model}：{LINE_SOURCES[line.source]}"


def show_line(value: float) -> str:
    return "关闭" if value < 0 else f"{value:g}"


def line_set_message(paths: DataPaths, name: str) -> str | None:
    """The confirmation after setting a recall floor: the value now in effect, for which model
    and from where; None for other keys."""
    config = load_config(paths)
    effective = line_in_effect(config, name)
    if effective is None:
        return None
    value, note = effective
    return f"{name} 现在是 {show_line(value)}（{note}）；只对这个模型生效，换模型后用那个模型自己的线"


def gate_params(config: Any, model_settings: ModelSettings) -> GateParams:
    """The floors in effect for the model (``recall_lines``), margin and top-k."""
    lines = recall_lines(config, model_settings)
    return GateParams(
        {group: line.value for group, line in lines.items()},
        float(config.recallMinMargin),
        int(config.recallTopK),
    )
