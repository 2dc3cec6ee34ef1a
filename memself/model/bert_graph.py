"""A BERT body as an ONNX graph, built from its weights with numpy and ``onnx`` alone (no torch).

What the runtime loads (``memself.model.runtime``): ``inputs_embeds`` (batch, tokens, hidden) and
``attention_mask`` (batch, tokens, int64) in, ``last_hidden_state`` (batch, tokens, hidden) out;
position and token-type embeddings and the embedding LayerNorm inside, the word-embedding table
outside (memory-mapped ``.npy``). The layers are Hugging Face ``BertModel``'s: absolute
positions, token type 0, post-LayerNorm, exact (erf) GELU, an additive attention mask.

``forward`` is the same body in plain numpy (float64): the independent reference a graph built
here is checked against when sentence-transformers is not installed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memself.errors import MemselfError

if TYPE_CHECKING:
    import numpy as np

ONNX_OPSET = 17
# What the graph fills masked attention scores with: torch's float32 minimum, as transformers does.
_MASKED = -3.4028234663852886e38


class NotBert(MemselfError):
    """The weights or config are not a BERT body this builder reproduces (the message says why)."""


@dataclass(frozen=True)
class BertShape:
    hidden: int
    layers: int
    heads: int
    ffn: int
    max_positions: int
    eps: float

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> BertShape:
        """The shape of a ``config.json``; ``NotBert`` for anything this builder does not mirror."""
        checks = {
            "model_type": ("bert",),
            "hidden_act": ("gelu",),
            "position_embedding_type": ("absolute", None),
            "is_decoder": (False, None),
            "add_cross_attention": (False, None),
        }
        for key, allowed in checks.items():
            if config.get(key) not in allowed:
                raise NotBert(f"{key}={config.get(key)!r}")
        try:
            shape = cls(
                hidden=int(config["hidden_size"]),
                layers=int(config["num_hidden_layers"]),
                heads=int(config["num_attention_heads"]),
                ffn=int(config["intermediate_size"]),
                max_positions=int(config["max_position_embeddings"]),
                eps=float(config.get("layer_norm_eps", 1e-12)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise NotBert(f"config.json: {exc}") from exc
        if shape.hidden % shape.heads:
            raise NotBert("hidden_size is not a multiple of num_attention_heads")
        return shape


def layer_shapes(shape: BertShape) -> dict[str, tuple[int, ...]]:
    """Each encoder layer's weights by name (under ``encoder.layer.N.``), as ``(out, in)`` for a
    dense layer and ``(hidden,)`` for a LayerNorm; each has a bias of its first dimension."""
    h, f = shape.hidden, shape.ffn
    return {
        "attention.self.query": (h, h),
        "attention.self.key": (h, h),
        "attention.self.value": (h, h),
        "attention.output.dense": (h, h),
        "attention.output.LayerNorm": (h,),
        "intermediate.dense": (f, h),
        "output.dense": (h, f),
        "output.LayerNorm": (h,),
    }


def body_weights(shape: BertShape, weights: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The body's tensors by ``BertModel`` state-dict name (a ``bert.`` prefix, as in a
    ``BertForMaskedLM`` checkpoint, is accepted), float32, shapes checked; ``NotBert`` else."""
    import numpy as np

    prefix = "" if "embeddings.word_embeddings.weight" in weights else "bert."
    h = shape.hidden
    wanted: dict[str, tuple[int, ...]] = {
        "embeddings.word_embeddings.weight": (-1, h),
        "embeddings.position_embeddings.weight": (shape.max_positions, h),
        "embeddings.token_type_embeddings.weight": (-1, h),
        "embeddings.LayerNorm.weight": (h,),
        "embeddings.LayerNorm.bias": (h,),
    }
    for layer in range(shape.layers):
        for name, wshape in layer_shapes(shape).items():
            wanted[f"encoder.layer.{layer}.{name}.weight"] = wshape
            wanted[f"encoder.layer.{layer}.{name}.bias"] = (wshape[0],)
    out: dict[str, np.ndarray] = {}
    for name, expected in wanted.items():
        found = weights.get(prefix + name)
        if found is None:
            raise NotBert(f"missing tensor {prefix + name}")
        if len(found.shape) != len(expected) or any(
            e not in (-1, g) for e, g in zip(expected, found.shape, strict=True)
        ):
            raise NotBert(f"{prefix + name} has shape {tuple(found.shape)}")
        out[name] = np.asarray(found, dtype=np.float32)
    return out


# --------------------------------------------------------------------------- the ONNX graph


def build_graph(shape: BertShape, weights: Mapping[str, np.ndarray]) -> Any:
    """The body as an ``onnx.ModelProto`` (``weights`` as ``body_weights`` returns them)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    nodes: list[Any] = []
    inits: list[Any] = []
    h, heads = shape.hidden, shape.heads
    head_dim = h // heads

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def node(op: str, inputs: list[str], out: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def linear(x: str, prefix: str, out: str) -> str:
        # Hugging Face keeps a Linear's weight as (out, in): the graph multiplies by its transpose.
        w = const(f"{prefix}.weight_t", weights[f"{prefix}.weight"].T)
        b = const(f"{prefix}.bias", weights[f"{prefix}.bias"])
        return node("Add", [node("MatMul", [x, w], f"{out}/matmul"), b], out)

    def layer_norm(x: str, prefix: str, out: str) -> str:
        w = const(f"{prefix}.weight", weights[f"{prefix}.weight"])
        b = const(f"{prefix}.bias", weights[f"{prefix}.bias"])
        return node("LayerNormalization", [x, w, b], out, axis=-1, epsilon=shape.eps)

    i64 = np.int64
    const("zero", np.array([0], i64))
    const("one", np.array([1], i64))
    const("two", np.array([2], i64))
    const("split_heads", np.array([0, 0, heads, head_dim], i64))
    const("merge_heads", np.array([0, 0, h], i64))
    const("scale", np.array(1.0 / math.sqrt(head_dim), np.float32))
    const("f_one", np.array(1.0, np.float32))
    const("f_half", np.array(0.5, np.float32))
    const("masked", np.array(_MASKED, np.float32))
    const("inv_sqrt2", np.array(1.0 / math.sqrt(2.0), np.float32))

    # Embeddings: positions 0..tokens-1, token type 0, then LayerNorm.
    positions = const(
        "embeddings.position_embeddings.weight", weights["embeddings.position_embeddings.weight"]
    )
    type0 = const("embeddings.token_type_0", weights["embeddings.token_type_embeddings.weight"][0])
    tokens = node("Shape", ["inputs_embeds"], "tokens", start=1, end=2)
    pos = node("Slice", [positions, "zero", tokens, "zero"], "positions")
    summed = node("Add", [node("Add", ["inputs_embeds", pos], "embed/pos"), type0], "embed/sum")
    x = layer_norm(summed, "embeddings.LayerNorm", "embed/ln")

    # The additive mask, (batch, 1, 1, tokens): 0 where attended, the float minimum where padded.
    maskf = node("Cast", ["attention_mask"], "mask/float", to=TensorProto.FLOAT)
    inverted = node("Sub", ["f_one", maskf], "mask/inverted")
    bias = node("Unsqueeze", [node("Mul", [inverted, "masked"], "mask/scaled"), "one"], "mask/u1")
    bias = node("Unsqueeze", [bias, "two"], "mask/bias")

    for layer in range(shape.layers):
        p = f"encoder.layer.{layer}"
        q = linear(x, f"{p}.attention.self.query", f"{p}/q")
        k = linear(x, f"{p}.attention.self.key", f"{p}/k")
        v = linear(x, f"{p}.attention.self.value", f"{p}/v")
        q = node("Transpose", [node("Reshape", [q, "split_heads"], f"{p}/q4")], f"{p}/qt", perm=[0, 2, 1, 3])
        k = node("Transpose", [node("Reshape", [k, "split_heads"], f"{p}/k4")], f"{p}/kt", perm=[0, 2, 3, 1])
        v = node("Transpose", [node("Reshape", [v, "split_heads"], f"{p}/v4")], f"{p}/vt", perm=[0, 2, 1, 3])
        scores = node("Mul", [node("MatMul", [q, k], f"{p}/qk"), "scale"], f"{p}/scores")
        probs = node("Softmax", [node("Add", [scores, bias], f"{p}/masked")], f"{p}/probs", axis=-1)
        context = node("Transpose", [node("MatMul", [probs, v], f"{p}/pv")], f"{p}/ctx_t", perm=[0, 2, 1, 3])
        context = node("Reshape", [context, "merge_heads"], f"{p}/ctx")
        attn = linear(context, f"{p}.attention.output.dense", f"{p}/attn_out")
        x = layer_norm(
            node("Add", [attn, x], f"{p}/attn_res"), f"{p}.attention.output.LayerNorm", f"{p}/attn_ln"
        )
        inner = linear(x, f"{p}.intermediate.dense", f"{p}/ffn_in")
        # Exact GELU: 0.5 * x * (1 + erf(x / sqrt(2))), the form onnxruntime fuses.
        erf = node("Erf", [node("Mul", [inner, "inv_sqrt2"], f"{p}/gelu_scaled")], f"{p}/gelu_erf")
        gelu = node("Mul", [inner, node("Add", [erf, "f_one"], f"{p}/gelu_1p")], f"{p}/gelu_x")
        gelu = node("Mul", [gelu, "f_half"], f"{p}/gelu")
        out = linear(gelu, f"{p}.output.dense", f"{p}/ffn_out")
        last = "last_hidden_state" if layer == shape.layers - 1 else f"{p}/out"
        x = layer_norm(node("Add", [out, x], f"{p}/ffn_res"), f"{p}.output.LayerNorm", last)
    if shape.layers == 0:
        nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"]))

    graph = helper.make_graph(
        nodes,
        "bert_body",
        [
            helper.make_tensor_value_info("inputs_embeds", TensorProto.FLOAT, ["batch", "tokens", h]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "tokens"]),
        ],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "tokens", h])],
        inits,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", ONNX_OPSET)], producer_name="memself"
    )
    model.ir_version = 8  # what onnxruntime releases back to 1.14 read
    return model


# --------------------------------------------------------------------------- the numpy reference


def forward(shape: BertShape, weights: Mapping[str, np.ndarray], ids: list[int]) -> np.ndarray:
    """``last_hidden_state`` of one unpadded text (token ids), in float64: the graph's reference."""
    import numpy as np

    table_name = "embeddings.word_embeddings.weight"
    # Already float64 when the caller converted once (no copy then); the table is read by row.
    w = {name: np.asarray(value, dtype=np.float64) for name, value in weights.items() if name != table_name}
    table = weights[table_name]
    t = len(ids)
    heads, head_dim = shape.heads, shape.hidden // shape.heads

    def norm(x: np.ndarray, prefix: str) -> np.ndarray:
        mean = x.mean(axis=-1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
        return (x - mean) / np.sqrt(var + shape.eps) * w[f"{prefix}.weight"] + w[f"{prefix}.bias"]

    def dense(x: np.ndarray, prefix: str) -> np.ndarray:
        return x @ w[f"{prefix}.weight"].T + w[f"{prefix}.bias"]

    x = np.asarray(table[np.asarray(ids)], dtype=np.float64)
    x = x + w["embeddings.position_embeddings.weight"][:t] + w["embeddings.token_type_embeddings.weight"][0]
    x = norm(x, "embeddings.LayerNorm")
    for layer in range(shape.layers):
        p = f"encoder.layer.{layer}"
        q, k, v = (dense(x, f"{p}.attention.self.{n}") for n in ("query", "key", "value"))
        context = np.empty_like(q)
        # One head at a time, as 2-D products: numpy runs stacked (3-D) products without BLAS.
        for head in range(heads):
            cols = slice(head * head_dim, (head + 1) * head_dim)
            qh, kh, vh = (np.ascontiguousarray(m[:, cols]) for m in (q, k, v))
            scores = qh @ kh.T / math.sqrt(head_dim)
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            context[:, cols] = (scores / scores.sum(axis=-1, keepdims=True)) @ vh
        x = norm(dense(context, f"{p}.attention.output.dense") + x, f"{p}.attention.output.LayerNorm")
        inner = dense(x, f"{p}.intermediate.dense")
        gelu = 0.5 * inner * (1.0 + _erf(inner / math.sqrt(2.0)))
        x = norm(dense(gelu, f"{p}.output.dense") + x, f"{p}.output.LayerNorm")
    return np.asarray(x)


def _erf(x: np.ndarray) -> np.ndarray:
    """erf to within 1.5e-7 (Abramowitz and Stegun 7.1.26): numpy has none, and the reference
    needs no more than the float32 graph it checks."""
    import numpy as np

    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return np.asarray(sign * (1.0 - poly * np.exp(-a * a)))
