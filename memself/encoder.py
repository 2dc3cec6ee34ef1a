"""Turn texts into L2-normalised float32 vectors, behind one small interface.

Everything that needs a vector goes through ``Encoder``; the one implementation uses
sentence-transformers for every model (hub, local folder, or the expanded offline model), so
the offline model exercises exactly the code path a hub model takes.

Imports of numpy / torch / sentence-transformers are lazy: the hook never imports this module,
but config and the CLI may import it for its names.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from memself.errors import MemselfError
from memself.models import DEFAULT_MODEL, OFFLINE_MODEL, ModelSettings, resolve_model

if TYPE_CHECKING:
    import numpy as np

MIRROR = "https://hf-mirror.com"
_BATCH = 32
THREADS_ENV = "MEMSELF_TORCH_THREADS"


class ModelUnavailable(MemselfError):
    """The embedding model could not be downloaded or loaded."""


@runtime_checkable
class Encoder(Protocol):
    """Vectors for queries (user prompts) and passages (memory texts).

    Both methods return an ``(n, dim)`` float32 array whose rows have unit L2 norm; an empty
    input gives ``(0, dim)``. Asymmetric models (e5) need the two sides told apart.
    """

    model_id: str
    dim: int

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray: ...

    def encode_passages(self, texts: Sequence[str]) -> np.ndarray: ...


class SentenceTransformerEncoder:
    """An ``Encoder`` over a loaded ``SentenceTransformer`` and its table settings."""

    def __init__(self, settings: ModelSettings, model: Any) -> None:
        self.settings = settings
        self.model_id = settings.model_id
        self._model = model
        self._single: Any = None  # see enable_fast_single
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        dim = getter()
        if dim is None:
            dim = int(self._encode([""]).shape[1])
        self.dim = int(dim)

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode([self.settings.query_prefix + t for t in texts])

    def encode_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode([self.settings.passage_prefix + t for t in texts])

    def enable_fast_single(self, kinds: Sequence[str] | None = None) -> str:
        """Encode single texts (each prompt) through a compiled path (``memself.fast_single``:
        ONNX Runtime, else a TorchScript trace); returns the kind turned on, "" for none.

        Why: the prompt hook waits for this forward pass, and the eager path's Python around
        each layer is a good part of it. Costs ~3 s once (the engine's warm-up) and ~90 MB.
        Checked before use on texts of several lengths against the eager path; a path that
        differs (cosine < 0.99999) or fails is skipped for the next one, and with none left the
        eager path stays on.
        """
        from memself.fast_single import FAST_KINDS, fast_single_paths

        probes = ["a", "支付模块的灰度开关配置在哪里，上线前要检查什么",
                  "记住：" + "上线前先在预发环境验证灰度开关，再通知值班同学。" * 12,
                  "很长的输入会被截断。" * 200]
        prefixed = [self.settings.query_prefix + t for t in probes]
        slow = self._eager(prefixed)
        for single in fast_single_paths(self._model, prompt_threads(),
                                        FAST_KINDS if kinds is None else kinds):
            try:
                fast = self._normalised([single(t) for t in prefixed])
            except Exception:  # a path that fails at run time is not used
                continue
            if bool(((fast * slow).sum(axis=1) > 0.99999).all()):
                self._single = single
                return single.kind
        return ""

    def _encode(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        if not texts:
            return np.zeros((0, getattr(self, "dim", 0)), dtype=np.float32)
        if len(texts) == 1 and self._single is not None:
            return self._normalised([self._single(texts[0])])
        return self._eager(texts)

    def _eager(self, texts: list[str]) -> np.ndarray:
        vecs = self._model.encode(texts, batch_size=_BATCH, convert_to_numpy=True,
                                  normalize_embeddings=False, show_progress_bar=False)
        return self._normalised(vecs)

    @staticmethod
    def _normalised(vecs: Any) -> np.ndarray:
        import numpy as np

        vecs = np.asarray(vecs, dtype=np.float32)
        # Normalise here rather than trusting the folder's modules: a hub folder may lack Normalize.
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        return vecs / np.maximum(norms, 1e-12)


def load_encoder(model: str = DEFAULT_MODEL, cache_dir: Path | None = None) -> Encoder:
    """Load ``model`` (a table key, hub id, local folder or ``multilingual-e5-small``).

    ``cache_dir`` is memself's model cache (``$MEMSELF_MODEL_CACHE`` or
    ``~/.cache/memself/models`` when None), used for the expanded offline model. Hub models go to
    the standard Hugging Face cache (``HF_HOME`` / ``HF_HUB_CACHE``) from ``HF_ENDPOINT``.
    Raises ``ModelUnavailable`` with a Chinese message when the model cannot be had.
    """
    settings = resolve_model(model)
    if settings.kind == "offline":
        from memself.offline_model import ensure_offline_model

        folder = ensure_offline_model(cache_dir)
        st_model = _load_local(folder, settings)
    elif settings.kind == "local":
        st_model = _load_local(Path(settings.source), settings)
    else:
        st_model = _load_hub(settings)
    return SentenceTransformerEncoder(settings, st_model)


def _load_local(folder: Path, settings: ModelSettings) -> Any:
    try:
        with _hub_offline():
            model = _construct(str(folder), local_files_only=True)
    except MemselfError:
        raise
    except Exception as exc:
        raise ModelUnavailable(
            f"无法加载本地模型文件夹 {folder}：{_reason(exc)}。请确认它是 sentence-transformers "
            f"格式的模型文件夹，或改用离线模型：memself config model {OFFLINE_MODEL}") from exc
    return _apply_pooling(model, settings)


def _load_hub(settings: ModelSettings) -> Any:
    # Cached first, without touching the network: a warm engine start must not depend on the hub.
    try:
        with _hub_offline():
            return _apply_pooling(_construct(settings.source, local_files_only=True), settings)
    except Exception:  # any failure here just means "not cached yet"
        pass
    endpoint = os.environ.get("HF_ENDPOINT", "").strip() or "https://huggingface.co"
    print(f"正在从 {endpoint} 下载嵌入模型 {settings.source}（只需一次）…", file=sys.stderr)
    try:
        model = _construct(settings.source, local_files_only=False, progress=True)
    except Exception as exc:
        raise ModelUnavailable(download_failure_message(settings.source, endpoint, exc)) from exc
    return _apply_pooling(model, settings)


def download_failure_message(model_id: str, endpoint: str, exc: BaseException) -> str:
    """The one message a failed download ends with: why, then the three ways out."""
    return (
        f"无法从 {endpoint} 下载嵌入模型 {model_id}：{_download_reason(exc)}。"
        f"解决办法任选其一：使用镜像，如 HF_ENDPOINT={MIRROR} memself rebuild-index；"
        f"或把模型下载到本地文件夹后运行 memself config model /path/to/folder；"
        f"或改用无需联网的离线模型：memself config model {OFFLINE_MODEL}")


def _download_reason(exc: BaseException) -> str:
    """A short Chinese cause; transformers rewraps hub errors, so look down the whole chain."""
    chain: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and len(chain) < 10:
        chain.append(cur)
        cur = cur.__cause__ or cur.__context__
    names = {type(e).__name__ for e in chain}
    text = " ".join(str(e) for e in chain).lower()
    if names & {"RepositoryNotFoundError", "GatedRepoError"} or "404" in text:
        return "找不到该模型（名称有误、仓库不存在或需要登录）"
    if names & {"ConnectError", "ConnectTimeout", "ReadTimeout", "TimeoutException",
                "ConnectionError", "LocalEntryNotFoundError"} or "connect" in text:
        return "连不上模型仓库"
    return _reason(exc)


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 160 else text[:157] + "..."


def _construct(name_or_path: str, *, local_files_only: bool, progress: bool = False) -> Any:
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    # Bars only while downloading. transformers' switch drives huggingface_hub's download bars
    # too; its "Loading weights" bar and init warnings are noise in a CLI otherwise.
    if progress:
        hf_logging.enable_progress_bar()
    else:
        hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    torch.set_num_threads(torch_threads())
    return SentenceTransformer(
        name_or_path,
        device="cpu",
        local_files_only=local_files_only,
        # CPU inference runs float32 whatever a hub folder's config says (some say float16).
        model_kwargs={"dtype": torch.float32},
    )


def torch_threads() -> int:
    """Threads for torch: ``$MEMSELF_TORCH_THREADS``, else 1.

    Why 1: a prompt is a few dozen tokens, too little work to split, and OpenMP threads spin at
    their barriers. Measured on a busy 2-core machine (bench/bench_encode.py): one short prompt
    took 45-75 ms with 1 thread and 400-1100 ms with 2.
    """
    raw = os.environ.get(THREADS_ENV, "").strip()
    try:
        value = int(raw) if raw else 1
    except ValueError:
        value = 1
    return max(1, min(value, os.cpu_count() or 1))


def prompt_threads() -> int:
    """Threads for the ONNX Runtime prompt path: ``$MEMSELF_TORCH_THREADS`` when set, else 2
    (or the one core there is).

    Why not 1 as for torch: ONNX Runtime's pool does not collapse when the cores are busy, as
    torch's OpenMP threads do. Measured on these 2-core machines, one short prompt, interleaved
    (p50): idle 16.4 ms with 2 threads vs 23.8 ms with 1; one busy-looping process beside it
    33.9 vs 38.6 ms; two 48.4 vs 49.1 ms.
    """
    if os.environ.get(THREADS_ENV, "").strip():
        return torch_threads()
    return max(1, min(2, os.cpu_count() or 1))


def _apply_pooling(model: Any, settings: ModelSettings) -> Any:
    """Force mean pooling when the table says so (bge ships CLS pooling; the original used mean)."""
    if settings.pooling != "mean":
        return model
    from sentence_transformers.sentence_transformer.modules import Pooling

    for idx, module in enumerate(model):
        if isinstance(module, Pooling):
            if module.pooling_mode != "mean":
                model[idx] = Pooling(module.embedding_dimension, pooling_mode="mean",
                                     include_prompt=module.include_prompt)
            return model
    return model


@contextlib.contextmanager
def _hub_offline() -> Iterator[None]:
    """While loading from disk, make huggingface_hub refuse the network instead of trying it.

    huggingface_hub reads HF_HUB_OFFLINE once at import, so the module constant is set as well as
    the environment; both are restored afterwards so a later hub download still works.
    """
    import huggingface_hub.constants as hub_constants

    old_env = os.environ.get("HF_HUB_OFFLINE")
    old_const = hub_constants.HF_HUB_OFFLINE
    os.environ["HF_HUB_OFFLINE"] = "1"
    hub_constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        hub_constants.HF_HUB_OFFLINE = old_const
        if old_env is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = old_env
