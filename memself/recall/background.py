"""The recall space: the directions every prompt shares, removed before the cosine.

Raw sentence vectors are anisotropic (unrelated Chinese sentences score high with e5), so recall
moves both sides into a space built from generic sentences: minus their mean, minus their top
``dims`` principal directions, re-normalised (``RecallSpace.project``). Why the principal
directions too (the "all-but-the-top" post-processing of Mu and Viswanath, 2018): a mean removes
the one direction every prompt shares, but general coding questions ("X 和 Y 有什么区别", "写一个 X
的函数") share several, and those directions are what makes an unrelated prompt land near a memory
about the same technology. With ``dims = 0`` the space is the original's centring,
``normalize(v - mean)``, with one mean for both sides.

The sentences are prompts, so they are encoded on the query side. The space depends only on the
model and the sentence file (``background_sentences.json``, or the shipped general prompts for a
model calibrated so), never on the memory pool, so recall works with one memory.

Cached per model under ``<model cache>/backgrounds/`` (``cache_file``): the background mean alone
as a ``(dim,)`` array, a space with principal directions (or built from the general prompts) as
``(1 + dims, dim)``, mean first; ``memself build-background`` rebuilds both.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from memself.atomic import save_npy
from memself.errors import CorruptFile, MemselfError

if TYPE_CHECKING:
    import numpy as np

    from memself.model.encoder import Encoder

SENTENCES_FILE = "background_sentences.json"
GENERAL_PROMPTS_FILE = "general_prompts.json"


def default_sentences_path() -> Path:
    """The shipped sentences (``memself/data``; a symlink to the repo root file in a checkout)."""
    return Path(str(resources.files("memself") / "data" / SENTENCES_FILE))


def general_prompts_path() -> Path:
    return Path(str(resources.files("memself") / "data" / GENERAL_PROMPTS_FILE))


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


def cache_file(model_id: str, digest: str, cache_dir: Path | None = None) -> Path:
    from memself.paths import model_cache_dir

    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", model_id).strip("_")[:80]
    # The readable name can collide (two local folders with the same name); the hash cannot.
    tag = hashlib.sha256(model_id.encode("utf-8")).hexdigest()[:8]
    root = cache_dir or model_cache_dir()
    return root / "backgrounds" / f"{safe}-{tag}-{digest[:16]}.npy"


# ------------------------------------------------------------------------------ the mean alone


@dataclass(frozen=True)
class Background:
    """The background mean of one model (what ``memself build-background`` reports)."""

    model_id: str
    digest: str  # sha256 of the sentence list it was built from
    mean: np.ndarray  # (dim,) float32


def build_background(
    encoder: Encoder | str, cache_dir: Path | None = None, sentences_path: Path | None = None
) -> Background:
    """Encode the sentences as queries, store their mean, return it (always recomputes).

    ``encoder`` may be a model name (what ``memself build-background`` has); it is loaded then.
    """
    if isinstance(encoder, str):
        from memself.model.encoder import load_encoder

        encoder = load_encoder(encoder, cache_dir)
    return _background(encoder, cache_dir, sentences_path, rebuild=True)


def load_background(
    encoder: Encoder, cache_dir: Path | None = None, sentences_path: Path | None = None
) -> Background:
    """The cached mean for this model and sentence file; built (and cached) when missing or bad."""
    return _background(encoder, cache_dir, sentences_path, rebuild=False)


def _background(
    encoder: Encoder, cache_dir: Path | None, sentences_path: Path | None, rebuild: bool
) -> Background:
    import numpy as np

    sentences = load_sentences(sentences_path)
    digest = sentences_digest(sentences)

    def build() -> np.ndarray:
        mean = encoder.encode_queries(sentences).mean(axis=0).astype(np.float32)
        if mean.shape != (encoder.dim,) or not np.isfinite(mean).all():
            raise MemselfError(f"模型 {encoder.model_id} 算出的背景向量无效（形状 {mean.shape}）")
        return mean

    mean = _cached(
        cache_file(encoder.model_id, digest, cache_dir),
        lambda stored: stored.shape == (encoder.dim,),
        build,
        rebuild,
    )
    return Background(encoder.model_id, digest, mean)


# --------------------------------------------------------------------------------- the space


@dataclass(frozen=True)
class RecallSpace:
    """Background mean plus the orthonormal directions removed after it (``(k, dim)``, k >= 0)."""

    model_id: str
    mean: np.ndarray
    components: np.ndarray

    def project(self, vectors: np.ndarray) -> np.ndarray:
        """``normalize((v - mean) minus its part along the components)``, row-wise, float32."""
        import numpy as np

        v = np.atleast_2d(np.asarray(vectors, dtype=np.float32)) - self.mean
        if len(self.components):
            v = v - (v @ self.components.T) @ self.components
        norms = np.linalg.norm(v, axis=1, keepdims=True)
        return (v / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)


def build_space(model_id: str, sentence_vectors: np.ndarray, dims: int) -> RecallSpace:
    """Mean and top ``dims`` principal directions of the (query-side) sentence vectors."""
    import numpy as np

    x = np.asarray(sentence_vectors, dtype=np.float32)
    mean = x.mean(axis=0).astype(np.float32)
    dims = min(max(dims, 0), max(len(x) - 1, 0))
    if dims:
        comps = np.linalg.svd(x - mean, full_matrices=False)[2][:dims].astype(np.float32)
    else:
        comps = np.zeros((0, x.shape[1]), dtype=np.float32)
    return RecallSpace(model_id, mean, comps)


def load_space(
    encoder: Encoder, dims: int, general: bool, cache_dir: Path | None = None, rebuild: bool = False
) -> RecallSpace:
    """The recall space of this model: ``dims`` principal directions removed, built from the
    general prompts when ``general`` (else from the background sentences). Cached; ``rebuild``
    encodes the sentences again and overwrites the cache (``memself build-background``).

    Without directions and without the general prompts it is the background mean alone (same
    cache file as ``load_background``).
    """
    import numpy as np

    if dims == 0 and not general:
        bg = _background(encoder, cache_dir, None, rebuild)
        return RecallSpace(
            encoder.model_id,
            np.asarray(bg.mean, dtype=np.float32),
            np.zeros((0, encoder.dim), dtype=np.float32),
        )
    sentences = load_sentences(general_prompts_path() if general else None)
    digest = sentences_digest([*sentences, f"space_dims={dims}"])

    def build() -> np.ndarray:
        space = build_space(encoder.model_id, encoder.encode_queries(sentences), dims)
        return np.vstack([space.mean[None, :], space.components])

    stored = _cached(
        cache_file(encoder.model_id, digest, cache_dir),
        lambda stored: stored.shape[1:] == (encoder.dim,) and 1 <= len(stored) <= 1 + dims,
        build,
        rebuild,
    )
    return RecallSpace(encoder.model_id, stored[0], stored[1:])


def _cached(
    path: Path, fits: Callable[[np.ndarray], bool], build: Callable[[], np.ndarray], rebuild: bool
) -> np.ndarray:
    """The float32 array cached at ``path`` when it loads, ``fits`` and is finite; otherwise (or
    when ``rebuild``) ``build()``, stored at ``path`` and returned."""
    import numpy as np

    if not rebuild:
        try:
            stored = np.load(path, allow_pickle=False)
            if stored.dtype == np.float32 and fits(stored) and np.isfinite(stored).all():
                return stored
        except (OSError, ValueError):
            pass  # missing or unreadable: rebuild below
    array = build()
    path.parent.mkdir(parents=True, exist_ok=True)
    save_npy(path, array)
    return array
