"""Prepare a model once: the only code that imports torch and sentence-transformers.

Steps (``prepare``), under a per-model file lock, into a temporary folder renamed into place:

1. load the model: a BERT body with safetensors weights (the offline model's 4-bit file, a local
   or downloaded sentence-transformers folder: ``memself.model.bert_source``) without torch;
   any other model as sentence-transformers does (the ``torch`` extra), from the Hugging Face
   cache or a download (``HF_ENDPOINT`` honoured) or a local folder;
2. write the transformer body as ONNX taking ``inputs_embeds`` (position and token-type
   embeddings and LayerNorm stay inside), with the word-embedding table beside it as ``.npy`` for
   the runtime to memory-map: built from the weights (``memself.model.bert_graph``), or exported
   by torch;
3. write the fast tokenizer (truncation at the model's length, padding set), and for a large
   Unigram vocabulary the compact form of ``memself.model.unigram`` when it tokenizes the same;
4. check the runtime on the export against a reference on ``PROBES``, both prefixes, one text
   at a time and batched with padding: every cosine >= ``MIN_COSINE``. The reference is the
   numpy body for a built graph, sentence-transformers for a torch export. A torch body that
   fails is exported again as the whole model taking ``input_ids``; if that fails too,
   preparation fails and leaves nothing behind;
5. write the manifest with every file's size and sha256.

``python -m memself.model.prepare MODEL`` is what the runtime runs when it meets an unprepared
model; ``memself model prepare`` and ``memself setup`` call ``prepare`` directly.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from memself.atomic import fsync_dir
from memself.errors import MemselfError, ModelUnavailable
from memself.model import cache, unigram
from memself.model.bert_graph import NotBert
from memself.model.bert_source import BertSource
from memself.model.cache import FORMAT_VERSION, MANIFEST, Prepared, PreparedInvalid
from memself.model.catalog import OFFLINE_MODEL, ModelSettings, resolve_model
from memself.model.encoder import download_failure_message, error_reason
from memself.model.probes import PROBES
from memself.platform import files as platform_files
from memself.platform.system import real_windows

if TYPE_CHECKING:
    import numpy as np

MIN_COSINE = 0.9999
ONNX_OPSET = 17
STEPS = 5
# The extra that installs torch and sentence-transformers, for models the graph builder does not
# cover; named in the error a model that needs it gives without it.
TORCH_EXTRA = "torch"
TORCH_INSTALL = (
    "installers\\install.ps1 -WithTorch" if real_windows() else "./installers/install.sh --with-torch"
)

Echo = Callable[[str], None]
Progress = Callable[[int, str], None]


def _announce_download(settings: ModelSettings) -> str:
    """The hub's address, once one short request showed it answers (huggingface_hub would retry
    an unreachable hub for over a minute), and the user told a download starts."""
    from memself.model import hub

    endpoint = hub.hub_endpoint()
    unreachable = hub.probe_hub(endpoint)
    if unreachable:
        raise ModelUnavailable(download_failure_message(settings.source, endpoint, unreachable))
    print(f"正在从 {endpoint} 下载嵌入模型 {settings.source}（只需一次）…", file=sys.stderr)
    return endpoint


class PrepareFailed(MemselfError):
    """The model could be loaded but not exported faithfully (or not at all)."""


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _no_progress(_n: int, _what: str = "") -> None:
    return None


# --------------------------------------------------------------------------- the whole preparation


def prepare(
    model: str,
    cache_dir: Path | None = None,
    *,
    settings: ModelSettings | None = None,
    force: bool = False,
    progress: Progress | None = None,
    echo: Echo = _stderr,
    now: datetime | None = None,
) -> Prepared:
    """Prepare ``model`` (a table key, hub id or folder) unless a good preparation exists.

    ``settings`` overrides the table's (tests force another pooling). Raises ``MemselfError``
    subclasses with Chinese messages: ``ModelUnavailable`` when the model cannot be had,
    ``PrepareFailed`` when it cannot be exported faithfully.
    """
    from filelock import FileLock, Timeout

    settings = settings or resolve_model(model)
    step = progress or _no_progress
    lock_file = cache.lock_path(settings, cache_dir)
    try:
        lock_file.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PrepareFailed(f"无法创建模型缓存目录 {lock_file.parent}：{exc.strerror or exc}") from exc
    lock = FileLock(str(lock_file), mode=0o600)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        echo(f"另一个进程正在准备向量模型 {model}，等它完成…")
        lock.acquire()
    try:
        if not force:
            with contextlib.suppress(PreparedInvalid):
                found = cache.find_prepared(settings, cache_dir)
                step(STEPS, "已准备好")
                return found
        return _prepare_locked(settings, cache_dir, step, now or datetime.now(timezone.utc))
    finally:
        lock.release()


def _prepare_locked(
    settings: ModelSettings, cache_dir: Path | None, step: Progress, now: datetime
) -> Prepared:
    step(0, "加载模型")
    source, why_torch = bert_source(settings, cache_dir)
    st_model = None if source is not None else load_sentence_transformer(settings, cache_dir, why_torch)
    revision = cache.current_revision(settings) or "unknown"
    step(1, "写分词器")
    parent = cache.model_folder(settings, cache_dir)
    parent.mkdir(parents=True, exist_ok=True)
    _remove_leftovers(parent)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=parent))
    try:
        if source is not None:
            manifest = export_graph(source, settings, tmp, step)
            names: tuple[str, ...] = ("numpy", "onnx", "onnxruntime", "tokenizers")
        else:
            manifest = export(st_model, settings, tmp, step)
            names = ("torch", "transformers", "sentence-transformers", "onnxruntime", "tokenizers")
        manifest.update(
            revision=revision, prepared_at=now.isoformat(timespec="seconds"), versions=_versions(names)
        )
        _finish(tmp, manifest)
        step(1, "完成")
        target = cache.revision_folder(settings, revision, cache_dir)
        _swap_into_place(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    for other in parent.iterdir():
        if other != target and other.is_dir():
            shutil.rmtree(other, ignore_errors=True)  # older revisions and formats
    found = cache.verify(target, settings, revision)
    return Prepared(found.folder, found.manifest, fresh=True)


def _remove_leftovers(parent: Path) -> None:
    # Under the lock, a temporary folder can only be a crashed preparer's.
    for item in parent.glob(".*"):
        if item.is_dir():
            shutil.rmtree(item, ignore_errors=True)


def _finish(folder: Path, manifest: dict[str, Any]) -> None:
    files = {}
    for path in sorted(folder.iterdir()):
        if path.is_file() and not path.name.startswith("."):
            files[path.name] = {"size": path.stat().st_size, "sha256": cache.file_sha256(path)}
    manifest["files"] = files
    (folder / MANIFEST).write_text(
        json.dumps(manifest, ensure_ascii=False, indent=2) + "\n", encoding="utf-8"
    )
    cache.write_stamps(folder, cache.stamps_for(folder, files))
    for path in folder.iterdir():
        platform_files.fsync_file(path)
    fsync_dir(folder)


def _swap_into_place(tmp: Path, target: Path) -> None:
    if target.exists():
        aside = target.with_name(f".old-{target.name}-{os.getpid()}")
        try:
            os.rename(target, aside)
        except PermissionError as exc:
            # Windows renames no folder with an open file in it: a running engine's model.
            raise PrepareFailed(
                f"旧的模型目录 {target} 正被占用（运行中的召回引擎？），没有替换：先运行 memself engine stop "
                f"再准备（{exc.strerror or exc}）"
            ) from exc
        shutil.rmtree(aside, ignore_errors=True)
    os.rename(tmp, target)
    fsync_dir(target.parent)


def _versions(names: tuple[str, ...]) -> dict[str, str]:
    from importlib import metadata

    out = {}
    for name in names:
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[name] = metadata.version(name)
    return out


# --------------------------------------------------------------------------- without torch


def bert_source(settings: ModelSettings, cache_dir: Path | None = None) -> tuple[BertSource | None, str]:
    """The model's weights, tokenizer and pooling read without torch, or None and why not."""
    from memself.model import bert_source as source

    force = "mean" if settings.pooling == "mean" else None
    try:
        if settings.kind == "offline":
            from memself.model.offline import weights_file

            return source.from_offline(weights_file(cache_dir)), ""
        if settings.kind == "local":
            return source.from_folder(Path(settings.source), force), ""
        folder = _hub_folder(settings)
        if folder is None:
            return None, "模型缓存里没有 safetensors 形式的权重"
        return source.from_folder(folder, force), ""
    except NotBert as exc:
        return None, str(exc)


def _hub_folder(settings: ModelSettings) -> Path | None:
    """The hub model's configs, tokenizer and safetensors weights: from the cache, else
    downloaded (those files only). None when the cache has the model but not in that form
    (sentence-transformers then loads it from the cache)."""
    from huggingface_hub import snapshot_download

    from memself.model import hub
    from memself.model.bert_source import FOLDER_FILES

    if hub.is_cached(settings.source):
        try:
            with _hub_offline():
                return Path(
                    snapshot_download(
                        settings.source, allow_patterns=list(FOLDER_FILES), local_files_only=True
                    )
                )
        except Exception:  # the cache holds another form of the model
            return None
    endpoint = _announce_download(settings)
    try:
        return Path(snapshot_download(settings.source, allow_patterns=list(FOLDER_FILES)))
    except Exception as exc:
        raise ModelUnavailable(download_failure_message(settings.source, endpoint, exc)) from exc


def export_graph(source: BertSource, settings: ModelSettings, folder: Path, step: Progress) -> dict[str, Any]:
    """The runtime's files built from the weights (no torch), checked against the numpy body."""
    import numpy as np
    import onnx

    from memself.model.bert_graph import build_graph
    from memself.model.runtime import LeanEncoder

    source.tokenizer.save(str(folder / "tokenizer.json"))
    manifest = _manifest(settings, source.pooling, source.max_tokens, source.pad_id)
    manifest["tokenizer"] = _write_compact_tokenizer(folder)
    step(1, "构建计算图")
    table = "embeddings.word_embeddings.weight"
    np.save(folder / "embeddings.npy", source.load()[table], allow_pickle=False)
    # From here the table is the file, read by row: its full-size copy is not held while the graph
    # is built and checked.
    source.weights[table] = np.load(folder / "embeddings.npy", mmap_mode="r")
    try:
        onnx.save(build_graph(source.shape, source.weights), str(folder / "model.onnx"))
        manifest.update(input="inputs_embeds", dim=source.shape.hidden, exporter="graph")
        step(1, "与参考实现比对")
        lean = LeanEncoder(Prepared(folder, manifest), settings, threads=max(1, os.cpu_count() or 1))
        try:
            result = check_against(lean, source, settings)
        finally:
            lean.close()
    finally:
        # Nothing keeps the folder's files mapped once it is checked (Windows renames no folder
        # with a mapped file in it), and the weights are not needed again.
        source.weights.clear()
    if not result["passed"]:
        raise PrepareFailed(
            f"构建的模型与参考实现的结果不一致（最小余弦 {result['min_cosine']:.6f}，要求 ≥ {MIN_COSINE}），"
            "准备失败，没有写入任何文件。请换用其他模型，或把这个问题报告给 memself。"
        )
    manifest["check"] = result
    step(1, "写校验和")
    return manifest


def _manifest(settings: ModelSettings, pooling: str, max_tokens: int, pad_id: int) -> dict[str, Any]:
    return {
        "format": FORMAT_VERSION,
        "model_id": settings.model_id,
        "kind": settings.kind,
        "source": settings.source,
        "pooling": pooling,
        "normalize": True,
        "query_prefix": settings.query_prefix,
        "passage_prefix": settings.passage_prefix,
        "max_tokens": max_tokens,
        "pad_id": pad_id,
        "tokenizer": "tokenizers",
        "input": "inputs_embeds",
    }


# --------------------------------------------------------------------------- sentence-transformers


def torch_missing() -> bool:
    return any(importlib.util.find_spec(name) is None for name in ("torch", "sentence_transformers"))


def load_sentence_transformer(
    settings: ModelSettings, cache_dir: Path | None = None, why_torch: str = ""
) -> Any:
    """The model as sentence-transformers loads it, with the table's pooling applied."""
    if torch_missing():
        name = settings.model_id if settings.kind != "local" else settings.source
        raise PrepareFailed(
            f"向量模型 {name} 需要 torch 和 sentence-transformers 才能准备"
            f"{f'（{why_torch}）' if why_torch else ''}，默认安装不带它们：请运行 {TORCH_INSTALL}"
            f"（即安装 memself[{TORCH_EXTRA}] 扩展，先装 CPU 版 torch==2.13.0）后重试，"
            f"或改用离线模型：memself config model {OFFLINE_MODEL}"
        )
    if settings.kind == "offline":
        from memself.model.offline import ensure_offline_model

        return _load_local(ensure_offline_model(cache_dir), settings)
    if settings.kind == "local":
        return _load_local(Path(settings.source), settings)
    return _load_hub(settings)


def _load_local(folder: Path, settings: ModelSettings) -> Any:
    try:
        with _hub_offline():
            model = _construct(str(folder), local_files_only=True)
    except MemselfError:
        raise
    except Exception as exc:
        raise ModelUnavailable(
            f"无法加载本地模型文件夹 {folder}：{error_reason(exc)}。请确认它是 sentence-transformers "
            f"格式的模型文件夹，或改用离线模型：memself config model {OFFLINE_MODEL}"
        ) from exc
    return apply_pooling(model, settings)


def _load_hub(settings: ModelSettings) -> Any:
    from memself.model import hub

    # Cached first, without touching the network (nor importing torch when nothing is cached).
    if hub.is_cached(settings.source):
        try:
            with _hub_offline():
                return apply_pooling(_construct(settings.source, local_files_only=True), settings)
        except Exception:  # any failure here just means "not cached whole yet"
            pass
    endpoint = _announce_download(settings)
    try:
        model = _construct(settings.source, local_files_only=False, progress=True)
    except Exception as exc:
        raise ModelUnavailable(download_failure_message(settings.source, endpoint, exc)) from exc
    return apply_pooling(model, settings)


def _construct(name_or_path: str, *, local_files_only: bool, progress: bool = False) -> Any:
    import torch
    from huggingface_hub.utils import logging as hub_logging
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    # Bars only while downloading. transformers' switch drives huggingface_hub's download bars
    # too; its "Loading weights" bar and init warnings are noise otherwise.
    if progress:
        hf_logging.enable_progress_bar()
    else:
        hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    # huggingface_hub logs each retry of a failing request in English ("Retrying in 8s"); the
    # failure itself reaches the user once, in Chinese, from the caller.
    hub_logging.set_verbosity_error()
    return SentenceTransformer(
        name_or_path,
        device="cpu",
        local_files_only=local_files_only,
        # CPU inference runs float32 whatever a hub folder's config says (some say float16).
        model_kwargs={"dtype": torch.float32},
    )


def apply_pooling(model: Any, settings: ModelSettings) -> Any:
    """Force mean pooling when the table says so (bge ships CLS pooling; the original used mean)."""
    if settings.pooling != "mean":
        return model
    from sentence_transformers.sentence_transformer.modules import Pooling

    for idx, module in enumerate(model):
        if isinstance(module, Pooling):
            if module.pooling_mode != "mean":
                model[idx] = Pooling(
                    module.embedding_dimension, pooling_mode="mean", include_prompt=module.include_prompt
                )
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


class ReferenceEncoder:
    """Unit vectors straight from sentence-transformers: what the export is checked against."""

    def __init__(self, st_model: Any) -> None:
        self.model = st_model

    def encode_raw(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        vecs = np.asarray(
            self.model.encode(
                list(texts),
                batch_size=8,
                convert_to_numpy=True,
                normalize_embeddings=False,
                show_progress_bar=False,
            ),
            dtype=np.float32,
        )
        return vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)


# --------------------------------------------------------------------------- export and check


def pipeline_pooling(st_model: Any) -> str:
    """ "mean" or "cls" for a [Transformer, Pooling, Normalize?] model; ``PrepareFailed`` else."""
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    modules = list(st_model)
    names = " + ".join(type(m).__name__ for m in modules)
    if (
        len(modules) < 2
        or not isinstance(modules[0], Transformer)
        or not isinstance(modules[1], Pooling)
        or not all(isinstance(m, Normalize) for m in modules[2:])
    ):
        raise PrepareFailed(
            f"不支持的模型结构（{names}）：memself 只支持 Transformer + Pooling "
            f"(+ Normalize) 的 sentence-transformers 模型"
        )
    mode = str(modules[1].pooling_mode)
    if mode not in ("mean", "cls") or not getattr(modules[1], "include_prompt", True):
        raise PrepareFailed(f"不支持的池化方式 {mode}：memself 只支持 mean 和 cls")
    return mode


def export(st_model: Any, settings: ModelSettings, folder: Path, step: Progress) -> dict[str, Any]:
    """Write the runtime's files into ``folder``; returns the manifest without its file list."""
    import torch

    from memself.model.runtime import LeanEncoder

    pooling = pipeline_pooling(st_model)
    transformer = st_model[0]
    body = transformer.auto_model.eval()
    hf_tokenizer = transformer.tokenizer
    max_tokens = int(transformer.max_seq_length)
    pad_id = hf_tokenizer.pad_token_id if hf_tokenizer.pad_token_id is not None else 0
    torch.set_num_threads(max(1, os.cpu_count() or 1))

    _write_tokenizer(hf_tokenizer, max_tokens, pad_id, folder)
    manifest = _manifest(settings, pooling, max_tokens, pad_id)
    manifest["exporter"] = "torch"
    manifest["tokenizer"] = _write_compact_tokenizer(folder)
    step(1, "导出计算图")
    reference = ReferenceEncoder(st_model)
    sample = _sample_ids(folder, pad_id)
    failures: list[str] = []
    for first in ("inputs_embeds", "input_ids"):
        _export_graph(body, first, sample, folder)
        manifest["input"] = first
        step(1 if first == "inputs_embeds" else 0, "与 sentence-transformers 比对")
        manifest["dim"] = int(body.config.hidden_size)
        lean = LeanEncoder(Prepared(folder, manifest), settings, threads=max(1, os.cpu_count() or 1))
        try:
            manifest["dim"] = int(lean.encode_raw(["dim"]).shape[1])
            result = check_against(lean, reference, settings)
        finally:
            lean.close()  # the folder is moved into place next
        if result["passed"]:
            manifest["check"] = result
            step(1, "写校验和")
            return manifest
        failures.append(f"{first}：最小余弦 {result['min_cosine']:.6f}")
    raise PrepareFailed(
        f"导出的模型与 sentence-transformers 的结果不一致（{'；'.join(failures)}，要求 ≥ {MIN_COSINE}），"
        "准备失败，没有写入任何文件。请换用其他模型，或把这个问题报告给 memself。"
    )


def _write_tokenizer(hf_tokenizer: Any, max_tokens: int, pad_id: int, folder: Path) -> None:
    from tokenizers import Tokenizer

    backend = getattr(hf_tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise PrepareFailed("这个模型没有快速分词器（tokenizer.json），memself 无法在运行时使用它")
    tok = Tokenizer.from_str(backend.to_str())
    side = getattr(hf_tokenizer, "truncation_side", "right") or "right"
    tok.no_padding()
    tok.enable_truncation(max_length=max_tokens, direction=side)
    pad_token = hf_tokenizer.pad_token or (tok.id_to_token(pad_id) or "")
    tok.enable_padding(pad_id=pad_id, pad_token=pad_token)
    tok.save(str(folder / "tokenizer.json"))


def _write_compact_tokenizer(folder: Path) -> str:
    """ "unigram" when the compact form gives the full tokenizer's ids on every test text."""
    from tokenizers import Tokenizer

    spec = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    if not unigram.applicable(spec):
        return "tokenizers"
    unigram.write(spec, folder)
    full = Tokenizer.from_file(str(folder / "tokenizer.json"))
    compact = unigram.load(folder)
    for text in tokenizer_test_texts():
        if full.encode(text).ids != compact.encode(text).ids:
            for name in unigram.FILES:
                (folder / name).unlink(missing_ok=True)
            return "tokenizers"
    return "unigram"


def tokenizer_test_texts(count: int = 2000) -> list[str]:
    """The probes, the shipped sentences, and seeded random mixes of scripts, symbols, spaces and
    special-token look-alikes."""
    from importlib import resources

    texts = list(PROBES)
    for name in ("background_sentences.json", "general_prompts.json"):
        with contextlib.suppress(OSError, ValueError):
            data = json.loads((resources.files("memself") / "data" / name).read_text(encoding="utf-8"))
            texts += [t for t in data if isinstance(t, str)]
    pieces = [
        *"abcxyzABCXYZ0123456789 的是了在支付灰度开关配置上线提交，。！？、“”（）【】《》",
        "🙂",
        "🚀",
        "\t",
        "\n",
        "  ",
        "\u3000",
        "\u00a0",
        "\u200b",
        "ｱ",
        "ＡＢ",
        "～",
        "ー",
        "…",
        "ß",
        "é",
        "ñ",
        "Ж",
        "ж",
        "Ω",
        "α",
        "ئ",
        "ห",
        "ᄀ",
        "<s>",
        "</s>",
        "<pad>",
        "<mask>",
        "<unk>",
        "[CLS]",
        "[UNK]",
        "'s",
        "n't",
        "http://",
        ".py",
        "def ",
        "->",
    ]
    rng = random.Random(20261130)
    for _ in range(count):
        texts.append("".join(rng.choice(pieces) for _ in range(rng.randint(0, 40))))
    return texts


def _sample_ids(folder: Path, pad_id: int) -> Any:
    """A padded two-text batch to trace the export with (dynamic batch and length axes)."""
    import torch
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    rows = [tok.encode(t).ids for t in ("初始化 sample", "a")]
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(row)
        mask[i, : len(row)] = 1
    return ids, mask


def _export_graph(body: Any, first: str, sample: Any, folder: Path) -> None:
    """``model.onnx`` taking ``first`` (inputs_embeds or input_ids) and attention_mask."""
    import numpy as np
    import torch

    class Body(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = body

        def forward(self, head: Any, attention_mask: Any) -> Any:
            return self.inner(
                **{first: head}, attention_mask=attention_mask, return_dict=True
            ).last_hidden_state

    ids, mask = sample
    embeddings = folder / "embeddings.npy"
    with torch.inference_mode():
        table = body.get_input_embeddings().weight.detach().to(torch.float32)
        head = table[ids] if first == "inputs_embeds" else ids
    if first == "inputs_embeds":
        np.save(embeddings, table.numpy(), allow_pickle=False)
    else:
        embeddings.unlink(missing_ok=True)
    try:
        with torch.inference_mode(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the exporter's notes on shape-dependent branches
            torch.onnx.export(
                Body().eval(),
                (head, mask),
                str(folder / "model.onnx"),
                input_names=[first, "attention_mask"],
                output_names=["last_hidden_state"],
                dynamic_axes={
                    first: {0: "batch", 1: "tokens"},
                    "attention_mask": {0: "batch", 1: "tokens"},
                    "last_hidden_state": {0: "batch", 1: "tokens"},
                },
                opset_version=ONNX_OPSET,
                do_constant_folding=True,
                dynamo=False,
            )
    except Exception as exc:
        raise PrepareFailed(f"导出 ONNX 计算图失败：{error_reason(exc)}") from exc


class Reference(Protocol):
    def encode_raw(self, texts: list[str]) -> np.ndarray: ...


def check_against(lean: Any, reference: Reference, settings: ModelSettings) -> dict[str, Any]:
    """Cosines of the runtime's vectors to the reference's on ``PROBES``, query and
    passage prefixes: one text at a time, batched by length, and in padded batches (the short
    texts together, and the longest text with a short one, padded to its full length)."""
    import numpy as np

    worst: dict[str, float] = {}
    worst_text = ""
    lowest = 2.0
    for prefix in dict.fromkeys((settings.query_prefix, settings.passage_prefix)):
        texts = [prefix + t for t in PROBES]
        expected = reference.encode_raw(texts)
        single = np.vstack([lean.encode_raw([t]) for t in texts])
        batched = lean.encode_raw(texts)
        ids = [lean.tokenize(t) for t in texts]
        short = [i for i, row in enumerate(ids) if len(row) <= 64]
        longest = max(range(len(ids)), key=lambda i: len(ids[i]))
        padded = np.zeros_like(expected)
        padded[short] = lean.forward([ids[i] for i in short])
        padded[[longest, short[0]]] = lean.forward([ids[longest], ids[short[0]]])
        padded_rows = sorted({*short, longest})
        padded = padded / np.maximum(np.linalg.norm(padded, axis=1, keepdims=True), 1e-12)
        for name, got, rows in (
            ("single", single, list(range(len(texts)))),
            ("batch", batched, list(range(len(texts)))),
            ("padded", padded, padded_rows),
        ):
            cosines = (got[rows] * expected[rows]).sum(axis=1)
            worst[name] = min(worst.get(name, 2.0), float(cosines.min()))
            if float(cosines.min()) < lowest:
                lowest = float(cosines.min())
                worst_text = texts[rows[int(cosines.argmin())]][:40]
    return {
        "probes": len(PROBES),
        "sides": 2 if settings.query_prefix != settings.passage_prefix else 1,
        "min_cosine": lowest,
        "by_mode": worst,
        "threshold": MIN_COSINE,
        "passed": lowest >= MIN_COSINE,
        "worst_text": worst_text,
    }


# --------------------------------------------------------------------------- run as a child


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memself.model.prepare")
    parser.add_argument("model")
    parser.add_argument("--cache-dir", type=Path, default=None)
    parser.add_argument("--error-file", type=Path, default=None)
    parser.add_argument("--force", action="store_true")
    args = parser.parse_args(argv)
    # Stopped by its parent (the engine stopping): unwind, so the temporary folder and the lock go.
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    from memself.progress import progress_bar

    try:
        with progress_bar("准备向量模型", STEPS) as advance:
            found = prepare(args.model, args.cache_dir, force=args.force, progress=advance)
        if found.fresh:
            print(found.done_message(args.model), file=sys.stderr, flush=True)
    except MemselfError as exc:
        message = str(exc)
    except Exception as exc:  # a bug or a library failure: still one clear line, no traceback
        message = f"准备向量模型 {args.model} 失败：{type(exc).__name__}: {error_reason(exc)}"
    else:
        return 0
    if args.error_file is not None:
        with contextlib.suppress(OSError):
            args.error_file.write_text(message + "\n", encoding="utf-8")
    print(f"错误：{message}", file=sys.stderr, flush=True)
    return 1


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    sys.exit(main())
