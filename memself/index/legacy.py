"""The original plugin's ``embeddings.jsonl``: its vectors are imported once into a new index.

Only for the model that made them (bge-base-zh, body text only, mean pooling: the original's
``EMBED_VERSION`` 4), so a user switching from the original keeps recall without re-encoding. A
marker file beside the header records the import: a later rebuild never reads the file again.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING

from memself.atomic import write_atomic
from memself.model.catalog import DEFAULT_MODEL

if TYPE_CHECKING:
    import numpy as np

LEGACY_MARKER = ".legacy-imported"
LEGACY_EV = 4
LEGACY_MODEL = DEFAULT_MODEL


def legacy_vectors(directory: Path, legacy_file: Path, model_id: str, dim: int) -> dict[str, np.ndarray]:
    """The original's unit vectors by memory id, when this index may still import them."""
    if model_id != LEGACY_MODEL or (directory / LEGACY_MARKER).exists():
        return {}
    return read_legacy_embeddings(legacy_file, dim)


def mark_imported(directory: Path) -> None:
    write_atomic(directory / LEGACY_MARKER, "imported\n")


def read_legacy_embeddings(path: Path, dim: int) -> dict[str, np.ndarray]:
    """``{"id","v","ev":4}`` lines of the original's embeddings.jsonl; bad lines are skipped."""
    import numpy as np

    out: dict[str, np.ndarray] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return out
    for line in text.splitlines():
        try:
            raw = json.loads(line)
        except ValueError:
            continue
        if not isinstance(raw, dict) or raw.get("ev") != LEGACY_EV:
            continue
        mid, vec = raw.get("id"), raw.get("v")
        if not isinstance(mid, str) or not isinstance(vec, list) or len(vec) != dim:
            continue
        if not all(isinstance(x, (int, float)) and math.isfinite(x) for x in vec):
            continue
        arr = np.asarray(vec, dtype=np.float32)
        norm = float(np.linalg.norm(arr))
        if norm > 1e-6:
            out[mid] = arr / norm
    return out
