"""The lean runtime: an ``Encoder`` over onnxruntime, ``tokenizers`` and numpy, nothing heavier.

It reads what ``memself.model.prepare`` wrote (``memself.model.cache``): the transformer body as
ONNX, the word-embedding table as a memory-mapped ``.npy`` (only the rows a text touches are read,
so a large multilingual table costs memory only for the words in use), the tokenizer, and the
pooling settings. Vectors are those of sentence-transformers (preparation checked them): the
table's prefixes, the model's pooling, then L2 normalisation.

torch, transformers and sentence-transformers are never imported here. A model that is not
prepared (or whose preparation is stale or damaged) is prepared on first use in a child process,
so even then this process stays lean.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from memself.errors import MemselfError, ModelUnavailable
from memself.model import unigram
from memself.model.cache import Prepared, PreparedInvalid, find_prepared
from memself.model.catalog import ModelSettings, resolve_model
from memself.model.prepare_child import prepare_in_child
from memself.model.row_table import RowTable
from memself.paths import model_cache_dir

if TYPE_CHECKING:
    import numpy as np

# Texts per forward pass, and padded tokens per pass: memory stays bounded for long texts.
_BATCH = 32
_TOKEN_BUDGET = 8192
HEAVY_MODULES = ("torch", "transformers", "sentence_transformers")

Notify = Callable[[str], None]


# Where onnxruntime's own files go (inside the model cache, so ``uninstall --purge`` takes them).
ONNXRUNTIME_CACHE = "onnxruntime"


def onnxruntime_module() -> ModuleType:
    """onnxruntime, imported with the user cache folder pointed into memself's model cache: on
    import it writes a device id under ``$XDG_CACHE_HOME`` (``~/.cache/Microsoft/DeveloperTools``),
    whatever ``ORT_DISABLE_TELEMETRY`` says, and that file would outlive memself."""
    loaded = sys.modules.get("onnxruntime")
    if loaded is not None:
        return loaded
    saved = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(model_cache_dir() / ONNXRUNTIME_CACHE)
    try:
        import onnxruntime
    finally:
        if saved is None:
            os.environ.pop("XDG_CACHE_HOME", None)
        else:
            os.environ["XDG_CACHE_HOME"] = saved
    return onnxruntime


class LeanEncoder:
    """An ``Encoder`` (``memself.model.encoder``) over a prepared model."""

    def __init__(self, prepared: Prepared, settings: ModelSettings, threads: int) -> None:
        ort = onnxruntime_module()

        manifest = prepared.manifest
        self.settings = settings
        self.model_id = settings.model_id
        self.dim = int(manifest["dim"])
        self.prepared = prepared
        self.threads = threads
        self._pooling = str(manifest["pooling"])
        self._input = str(manifest["input"])
        self._pad_id = int(manifest["pad_id"])
        self._tokenizer = load_tokenizer(prepared)
        self._table = RowTable(prepared.path("embeddings.npy")) if self._input == "inputs_embeds" else None
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3  # notes on unused initializers would go to stderr
        self._session = ort.InferenceSession(
            str(prepared.path("model.onnx")), options, providers=["CPUExecutionProvider"]
        )
        # onnxruntime's arena would keep the largest batch's buffers for the life of the
        # process (hundreds of MB after encoding memories); batches give them back after each
        # run, single prompts keep the arena's small buffers warm.
        self._batch_run = ort.RunOptions()
        self._batch_run.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
        release_free_heap()

    def close(self) -> None:
        """Let go of the prepared folder's files (``RowTable.close``); the encoder is not used again."""
        if self._table is not None:
            self._table.close()

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        prefix = self.settings.query_prefix
        return self.encode_raw([prefix + t for t in texts])

    def encode_passages(self, texts: Sequence[str]) -> np.ndarray:
        prefix = self.settings.passage_prefix
        return self.encode_raw([prefix + t for t in texts])

    def encode_raw(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors of ``texts`` as given (prefixes already applied), in order.

        A batch is sorted by token count and cut into runs of similar length, so short texts are
        not padded to the longest one.
        """
        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        ids = [self.tokenize(t) for t in texts]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        start = 0
        while start < len(order):
            end = start + 1
            while (
                end < len(order)
                and end - start < _BATCH
                and (end - start + 1) * len(ids[order[end]]) <= _TOKEN_BUDGET
            ):
                end += 1
            chunk = order[start:end]
            out[chunk] = self.forward([ids[i] for i in chunk])
            start = end
        if len(texts) > 1:
            release_free_heap()
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-12)

    def tokenize(self, text: str) -> list[int]:
        """Token ids with the model's special tokens, truncated to its length."""
        return self._tokenizer.encode(text).ids

    def forward(self, batch: Sequence[Sequence[int]]) -> np.ndarray:
        """Pooled, unnormalised vectors of token id lists (padded here to the longest)."""
        import numpy as np

        width = max(len(row) for row in batch)
        ids = np.full((len(batch), width), self._pad_id, dtype=np.int64)
        mask = np.zeros((len(batch), width), dtype=np.int64)
        for i, row in enumerate(batch):
            ids[i, : len(row)] = row
            mask[i, : len(row)] = 1
        if self._table is not None:
            feed = {"inputs_embeds": self._table.take(ids), "attention_mask": mask}
        else:
            feed = {"input_ids": ids, "attention_mask": mask}
        hidden = self._session.run(None, feed, self._batch_run if len(batch) > 1 else None)[0]
        if self._pooling == "cls":
            return np.ascontiguousarray(hidden[:, 0, :], dtype=np.float32)
        weights = mask[:, :, None].astype(np.float32)
        summed = (hidden * weights).sum(axis=1)
        return (summed / np.maximum(weights.sum(axis=1), 1e-9)).astype(np.float32)


def load_tokenizer(prepared: Prepared) -> Any:
    from tokenizers import Tokenizer

    if prepared.manifest.get("tokenizer") == "unigram":
        return unigram.load(prepared.folder)
    return Tokenizer.from_file(str(prepared.path("tokenizer.json")))


def release_free_heap() -> None:
    """Give the C heap's free pages back to the system: loading the graph parses a protobuf copy
    of it (tens of MB), and a batch frees its activations (hundreds of MB), which glibc would
    otherwise keep in the process for good. Costs a few milliseconds."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass  # not glibc: nothing to do


def heavy_modules_loaded() -> list[str]:
    return [name for name in HEAVY_MODULES if name in sys.modules]


# --------------------------------------------------------------------------- loading


def load_lean_encoder(
    model: str, cache_dir: Path | None, threads: int, notify: Notify | None = None
) -> LeanEncoder:
    """The runtime encoder for ``model`` with ``threads`` in onnxruntime's pool, preparing it
    first when needed (with a message). Callers go through ``memself.model.encoder.load_encoder``."""
    settings = resolve_model(model)
    prepared = ensure_prepared(model, settings, cache_dir, notify)
    try:
        return LeanEncoder(prepared, settings, threads)
    except MemselfError:
        raise
    except Exception as exc:  # a graph or tokenizer onnxruntime cannot read despite its checksum
        raise ModelUnavailable(
            f"无法加载已准备的向量模型 {model}（{type(exc).__name__}）：请运行 memself model prepare "
            f"--force 重新准备"
        ) from exc


def ensure_prepared(
    model: str, settings: ModelSettings, cache_dir: Path | None = None, notify: Notify | None = None
) -> Prepared:
    try:
        return find_prepared(settings, cache_dir)
    except PreparedInvalid as exc:
        reason = str(exc)
    check_hub_first(model, settings)
    say = notify or _to_stderr
    say(f"向量模型 {model} {reason}：正在准备（只需一次，可能要一两分钟）…")
    prepare_in_child(model, cache_dir)
    try:
        return find_prepared(settings, cache_dir)
    except PreparedInvalid as exc:
        raise ModelUnavailable(f"向量模型 {model} 准备完成后仍不可用：{exc}") from None


def check_hub_first(model: str, settings: ModelSettings) -> None:
    """A hub model that is not downloaded yet needs the hub: one short request says whether it
    answers, before a child spends seconds importing torch and then minutes in huggingface_hub's
    retries. Unreachable: one sentence with what to run (setup falls back to the offline model)."""
    if settings.kind != "hub":
        return
    from memself.model import hub

    if hub.is_cached(settings.source):
        return
    unreachable = hub.probe_hub(hub.hub_endpoint())
    if unreachable:
        raise ModelUnavailable(
            f"向量模型 {model} 还没有准备好，下载它要连的模型仓库连不上（{unreachable}）："
            f"请先运行 memself setup，连不上时它会改用随包的离线模型；"
            f"在中国大陆也可以先设镜像，如 HF_ENDPOINT={hub.MIRROR} memself setup"
        )


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
