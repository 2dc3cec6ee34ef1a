"""The background mean: the direction every prompt shares, removed before the cosine.

Raw sentence vectors are anisotropic (unrelated Chinese sentences score about 0.83 with e5), so
recall centres both sides on the mean of generic sentences and re-normalises:
``c(v) = normalize(v - mean)``. The mean depends only on the model and on
``background_sentences.json``, never on the memory pool, so recall works with one memory.

Which side the background is encoded on: as queries (with e5's ``query: `` prefix), and the one
mean centres both queries and memory vectors, as in the original (one mean for both sides). The
sentences are prompts, so the query side is their natural encoding. Measured on dev-cases.json with
multilingual-e5-small (dense cosine, original gate, best floor with project leaks <= 12% / rule
leaks <= 28%): query mean on both sides 81% project / 61% rule hits; passage mean on both 72% /
58%; separate query and passage means 72% / 58%. For prefix-free models (bge) the sides agree.

Cached per model as ``<model cache>/backgrounds/<model>-<id hash>-<sentences sha256[:16]>.npy``
(a ``(dim,)`` float32 array); ``memself build-background`` rebuilds it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from memself.errors import CorruptFile, MemselfError

if TYPE_CHECKING:
    import numpy as np

    from memself.encoder import Encoder

SENTENCES_FILE = "background_sentences.json"


def default_sentences_path() -> Path:
    """The shipped sentences (``memself/data``; a symlink to the repo root file in a checkout)."""
    return Path(str(resources.files("memself") / "data" / SENTENCES_FILE))


def load_sentences(path: Path | None = None) -> list[str]:
    """The background sentences, validated: a JSON list of at least 10 distinct non-empty strings."""
    src = path or default_sentences_path()
    try:
        data = json.loads(src.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CorruptFile(f"背景句子文件 {src} 读取失败：{exc}") from exc
    if not isinstance(data, list) or not all(isinstance(s, str) and s.strip() for s in data):
        raise CorruptFile(f"背景句子文件 {src} 必须是非空字符串组成的 JSON 数组")
    sentences = list(dict.fromkeys(s.strip() for s in data))
    if len(sentences) < 10:
        raise CorruptFile(f"背景句子文件 {src} 只有 {len(sentences)} 句，至少需要 10 句")
    return sentences


def sentences_digest(sentences: list[str]) -> str:
    blob = json.dumps(sentences, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()


@dataclass(frozen=True)
class Background:
    """The background mean of one model; centre query and memory vectors with it alike."""

    model_id: str
    digest: str  # sha256 of the sentence list it was built from
    mean: np.ndarray  # (dim,) float32

    def centre(self, vectors: np.ndarray) -> np.ndarray:
        return centre(vectors, self.mean)


def centre(vectors: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """``normalize(v - mean)`` row-wise, float32; accepts one vector ``(dim,)`` or ``(n, dim)``."""
    import numpy as np

    v = np.asarray(vectors, dtype=np.float32)
    single = v.ndim == 1
    m = np.atleast_2d(v) - np.asarray(mean, dtype=np.float32)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    out = m / np.maximum(norms, 1e-12)
    return out[0] if single else out


def cache_file(model_id: str, digest: str, cache_dir: Path | None = None) -> Path:
    from memself.offline_model import model_cache_dir

    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", model_id).strip("_")[:80]
    # The readable name can collide (two local folders with the same name); the hash cannot.
    tag = hashlib.sha256(model_id.encode("utf-8")).hexdigest()[:8]
    root = cache_dir or model_cache_dir()
    return root / "backgrounds" / f"{safe}-{tag}-{digest[:16]}.npy"


def build_background(
    encoder: Encoder | str, cache_dir: Path | None = None, sentences_path: Path | None = None
) -> Background:
    """Encode the sentences as queries, store their mean, return it (always recomputes).

    ``encoder`` may be a model name (what ``memself build-background`` has); it is loaded then.
    """
    import numpy as np

    if isinstance(encoder, str):
        from memself.encoder import load_encoder

        encoder = load_encoder(encoder, cache_dir)
    sentences = load_sentences(sentences_path)
    digest = sentences_digest(sentences)
    mean = encoder.encode_queries(sentences).mean(axis=0).astype(np.float32)
    if mean.shape != (encoder.dim,) or not np.isfinite(mean).all():
        raise MemselfError(f"模型 {encoder.model_id} 算出的背景向量无效（形状 {mean.shape}）")
    _save_npy(cache_file(encoder.model_id, digest, cache_dir), mean)
    return Background(encoder.model_id, digest, mean)


def load_background(
    encoder: Encoder, cache_dir: Path | None = None, sentences_path: Path | None = None
) -> Background:
    """The cached mean for this model and sentence file; built (and cached) when missing or bad."""
    import numpy as np

    sentences = load_sentences(sentences_path)
    digest = sentences_digest(sentences)
    path = cache_file(encoder.model_id, digest, cache_dir)
    try:
        mean = np.load(path, allow_pickle=False)
        if mean.shape == (encoder.dim,) and mean.dtype == np.float32 and np.isfinite(mean).all():
            return Background(encoder.model_id, digest, mean)
    except (OSError, ValueError):
        pass  # missing or unreadable: rebuild below
    return build_background(encoder, cache_dir, sentences_path)


def _save_npy(path: Path, array: np.ndarray) -> None:
    import numpy as np

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            np.save(fh, array, allow_pickle=False)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
