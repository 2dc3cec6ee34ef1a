"""Turn texts into L2-normalised float32 vectors, behind one small interface.

Everything that needs a vector goes through ``Encoder``. The one implementation at run time is
``memself.model.runtime.LeanEncoder`` (onnxruntime + tokenizers + numpy) over a model prepared
once by ``memself.model.prepare`` (the only code that imports torch and sentence-transformers).

Standard library only at import: config and the CLI import this module for its names.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from memself.model.catalog import DEFAULT_MODEL, OFFLINE_MODEL
from memself.model.hub import MIRROR

if TYPE_CHECKING:
    import numpy as np


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


def load_encoder(
    model: str = DEFAULT_MODEL,
    cache_dir: Path | None = None,
    threads: int | None = None,
    notify: Callable[[str], None] | None = None,
) -> Encoder:
    """The runtime encoder for ``model`` (a table key, hub id, local folder or
    ``multilingual-e5-small``), prepared first if it is not (a message on stderr, or ``notify``).

    ``cache_dir`` is memself's model cache (``$MEMSELF_MODEL_CACHE`` or ``~/.cache/memself/models``
    when None). ``threads``: onnxruntime's pool, ``prompt_threads()`` when None.
    Raises ``memself.errors.ModelUnavailable`` with a Chinese message when the model cannot be had.
    """
    from memself.model.runtime import load_lean_encoder

    return load_lean_encoder(model, cache_dir, threads or prompt_threads(), notify)


def prompt_threads() -> int:
    """onnxruntime threads for encoding prompts: 2 (or the one core there is).

    Why not 1: onnxruntime's pool does not collapse when the cores are busy, as torch's OpenMP
    threads did: on a two-core machine two threads encode a short prompt faster than one when
    idle, and no slower when the cores are busy.
    """
    return max(1, min(2, os.cpu_count() or 1))


def batch_threads() -> int:
    """Threads for commands that encode many texts and nothing else (rebuild-index)."""
    return max(1, min(8, os.cpu_count() or 1))


def download_failure_message(model_id: str, endpoint: str, exc: BaseException | str) -> str:
    """The one message a failed download ends with: why (an exception, or the reason as text),
    then the three ways out."""
    reason = exc if isinstance(exc, str) else _download_reason(exc)
    return (
        f"无法从 {endpoint} 下载嵌入模型 {model_id}：{reason}。"
        f"解决办法任选其一：使用镜像，如 HF_ENDPOINT={MIRROR} memself model prepare；"
        f"或把模型下载到本地文件夹后运行 memself config model /path/to/folder；"
        f"或改用无需联网的离线模型：memself config model {OFFLINE_MODEL}"
    )


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
    if (
        names
        & {
            "ConnectError",
            "ConnectTimeout",
            "ReadTimeout",
            "TimeoutException",
            "ConnectionError",
            "LocalEntryNotFoundError",
        }
        or "connect" in text
    ):
        return "连不上模型仓库"
    return error_reason(exc)


def error_reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 160 else text[:157] + "..."
