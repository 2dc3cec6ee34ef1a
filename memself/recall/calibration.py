"""The calibrated recall numbers of one model, read from its data file.

``memself/data/recall/<model>.json`` holds everything recall measured for that model: the default
floors, the scoring knobs (space, lexical weights, sentence views, appliesWhen views), the offset a
memory scored with its appliesWhen views pays, and the general-question detector (a logistic
classifier on the prompt's raw vector, with a penalty per group). ``bench/recall_calibrate.py``
writes the calibrated parts with ``memself.recall.fitting``; ``docs/recall.md`` says how.

A model is matched by its exact ``model_id`` (the file name is derived from it and the file names
it again inside). A model without a file (the default bge model, a hub id outside the table, a
local folder) has no calibration: it keeps the plain centred cosine and the model table's floors.
Nothing calibrated for one model is ever applied to another, not even to the same model's
full-precision twin.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memself.errors import CorruptFile
from memself.store.records import GROUPS

if TYPE_CHECKING:
    import numpy as np

FORMAT = "memself-recall-calibration"
VERSION = 1


@dataclass(frozen=True)
class GeneralQuestion:
    """P(the prompt needs no memory) = sigmoid(weights . v + bias), v the prompt's raw (unit, query
    side) vector, its length features when the model uses them, then which of ``words`` it
    contains (``memself.recall.wording``, scaled by ``word_scale``: the file's
    ``scoring.general_words``); a group's scores drop by ``penalty[group]`` x P."""

    weights: tuple[float, ...]
    bias: float
    penalty: dict[str, float]
    words: tuple[str, ...] = ()
    word_scale: float = 0.0

    # Built once per loaded calibration, not on every prompt the detector reads.
    @cached_property
    def weight_vector(self) -> np.ndarray:
        import numpy as np

        return np.asarray(self.weights, dtype=np.float64)

    @cached_property
    def word_index(self) -> dict[str, int]:
        from memself.recall.wording import word_index

        return word_index(self.words)


@dataclass(frozen=True)
class RecallCalibration:
    model_id: str
    floors: dict[str, float]
    scoring: dict[str, float] = field(default_factory=dict)
    view_offset: dict[str, float] = field(default_factory=lambda: {g: 0.0 for g in GROUPS})
    general: GeneralQuestion | None = None
    source: Path | None = None
    # What recall reached held out (leave-one-set-out on the sets it was calibrated on), per
    # condition ("without" / "with" requests): ruleHit, ruleLeak, projectHit, projectLeak, single.
    held_out: dict[str, dict[str, float]] = field(default_factory=dict)


def calibration_dir() -> Path:
    return Path(str(resources.files("memself") / "data" / "recall"))


def file_name(model_id: str) -> str:
    """``multilingual-e5-small.json``; a hub id's ``/`` becomes ``--``; anything else unsafe ``_``."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", model_id.replace("/", "--")) + ".json"


def load_calibration(model_id: str, directory: Path | None = None) -> RecallCalibration | None:
    """The calibration of exactly this model, or None when it has none."""
    return _load(model_id, str(directory or calibration_dir()))


@lru_cache(maxsize=16)
def _load(model_id: str, directory: str) -> RecallCalibration | None:
    if not model_id or model_id.startswith("local:"):
        return None  # a folder is whatever the user put there: never assume it is a known model
    path = Path(directory) / file_name(model_id)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise CorruptFile(f"召回校准文件 {path} 读取失败：{exc}") from exc
    return parse_calibration(raw, model_id, path)


def parse_calibration(raw: object, model_id: str, path: Path | None = None) -> RecallCalibration | None:
    """Validate a calibration file's content; None when it names another model (a file copied or
    renamed onto this model's name is not this model's calibration)."""
    where = str(path) if path else "召回校准"
    if not isinstance(raw, dict) or raw.get("format") != FORMAT or raw.get("version") != VERSION:
        raise CorruptFile(f"{where} 不是第 {VERSION} 版的召回校准文件")
    if raw.get("model") != model_id:
        return None
    floors = _groups(raw.get("floors"), f"{where} 的 floors")
    offset = _groups(raw.get("view_offset", {g: 0.0 for g in GROUPS}), f"{where} 的 view_offset")
    scoring_raw = raw.get("scoring", {})
    if not isinstance(scoring_raw, dict) or not all(_finite(v) for v in scoring_raw.values()):
        raise CorruptFile(f"{where} 的 scoring 必须是数值")
    general = None
    gq = raw.get("general_question")
    if gq is not None:
        if not isinstance(gq, dict):
            raise CorruptFile(f"{where} 的 general_question 格式不对")
        weights = gq.get("weights")
        if (
            not isinstance(weights, list)
            or not weights
            or not all(_finite(w) for w in weights)
            or not _finite(gq.get("bias"))
        ):
            raise CorruptFile(f"{where} 的 general_question 权重格式不对")
        words = gq.get("words", [])
        # One number for the words' scale: the knob the weights were trained at is the one read.
        scale = scoring_raw.get("general_words", 0.0)
        if not isinstance(words, list) or not all(isinstance(w, str) and w for w in words):
            raise CorruptFile(f"{where} 的 general_question.words 必须是非空字符串的列表")
        if words and (scale <= 0 or len(weights) <= len(words)):
            raise CorruptFile(
                f"{where} 的 general_question.words 需要 scoring.general_words 大于 0，且权重多于词数"
            )
        general = GeneralQuestion(
            tuple(float(w) for w in weights),
            float(gq["bias"]),
            _groups(gq.get("penalty"), f"{where} 的 general_question.penalty"),
            tuple(words),
            float(scale),
        )
    return RecallCalibration(
        model_id,
        floors,
        {k: float(v) for k, v in scoring_raw.items()},
        offset,
        general,
        path,
        _held_out(raw.get("held_out", {}), where),
    )


HELD_OUT_RATES = ("ruleHit", "ruleLeak", "projectHit", "projectLeak", "single")


def _held_out(value: object, where: str) -> dict[str, dict[str, float]]:
    if not isinstance(value, dict):
        raise CorruptFile(f"{where} 的 held_out 格式不对")
    out: dict[str, dict[str, float]] = {}
    for condition, rates in value.items():
        if not isinstance(rates, dict) or not all(
            _finite(rates.get(k)) and 0.0 <= rates[k] <= 1.0 for k in HELD_OUT_RATES
        ):
            names = "、".join(HELD_OUT_RATES)
            raise CorruptFile(f"{where} 的 held_out.{condition} 需要 0 到 1 之间的 {names}")
        out[str(condition)] = {k: float(rates[k]) for k in HELD_OUT_RATES}
    return out


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _groups(value: object, what: str) -> dict[str, float]:
    if not isinstance(value, dict) or not all(_finite(value.get(g)) for g in GROUPS):
        raise CorruptFile(f"{what} 需要 rule 和 project 两个数值")
    return {g: float(value[g]) for g in GROUPS}
