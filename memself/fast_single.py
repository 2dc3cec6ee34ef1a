"""Faster forward passes for one unpadded text: the prompt the hook is waiting for.

The engine encodes each prompt alone, and that forward pass is most of a prompt hook's time.
Two compiled paths, tried in this order, both fed the same tokens as the eager path:

- ``onnx``: the transformer body exported to ONNX (in memory, no file) and run by ONNX Runtime.
  The word-embedding lookup stays outside the graph (a numpy view of the loaded model's table),
  so the export holds only the layers: 86 MB for multilingual-e5-small instead of 470 MB with its
  250k-piece vocabulary. Measured on these machines (e5-small, 1 thread, short prompts):
  22-24 ms p50 on one thread instead of 41-45 ms for the TorchScript trace in its slow spells
  (25 ms in its good ones), cosine 1.0000 to the eager path; 16-21 ms on two threads.
- ``torchscript``: a frozen TorchScript trace of the same body (no extra package needed).

Either is only for a single unpadded text: shape-dependent branches (padding masks) never differ
for such an input. Batches (memory encoding) keep the eager path. The caller checks the chosen
path against the eager one before using it (``SentenceTransformerEncoder.enable_fast_single``).
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

FAST_KINDS = ("onnx", "torchscript")
_PROBE_TEXT = "query: 初始化"


class SingleText:
    """One text -> its mean-pooled, unnormalised embedding (a 1-D float32 array)."""

    kind = ""

    def __call__(self, text: str) -> Any:
        raise NotImplementedError


def fast_single_paths(model: Any, threads: int,
                      kinds: Sequence[str] = FAST_KINDS) -> Iterator[SingleText]:
    """Each of ``kinds`` that can be built for this sentence-transformers ``model``, in order;
    nothing when the model is not [Transformer, mean Pooling, Normalize?]. ``threads`` is the
    ONNX Runtime pool's size (TorchScript uses torch's own setting)."""
    body = _body(model)
    if body is None:
        return
    builders: dict[str, Callable[[Any, Any, int], SingleText]] = {
        "onnx": OnnxSingle.build, "torchscript": TorchScriptSingle.build}
    for kind in kinds:
        try:
            yield builders[kind](model, body, threads)
        except Exception:  # a missing package or an export the model does not fit
            continue


def _body(model: Any) -> Any:
    """The Hugging Face model under a [Transformer, mean Pooling, Normalize?] pipeline, if it is
    one and its tokenizer gives nothing a single-segment forward pass would need besides ids and
    the mask (BERT's token_type_ids are all zero for one text, the model's own default)."""
    import torch
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling

    modules = list(model)
    if len(modules) < 2 or not isinstance(modules[1], Pooling):
        return None
    if modules[1].pooling_mode != "mean" or not getattr(modules[1], "include_prompt", True):
        return None
    if not all(isinstance(m, Normalize) for m in modules[2:]):
        return None
    auto_model = getattr(modules[0], "auto_model", None)
    if auto_model is None:
        return None
    features = _preprocess(model)([_PROBE_TEXT])
    extra = {k for k, v in features.items() if isinstance(v, torch.Tensor)} - {
        "input_ids", "attention_mask"}
    if extra - {"token_type_ids"} or ("token_type_ids" in extra
                                      and bool(features["token_type_ids"].any())):
        return None
    return auto_model


def _mean_pooled(body: Any, first_input: str) -> Any:
    """``body`` as a module of (``first_input``, attention_mask) -> mean of the last hidden
    states: what a compiled path records. Mean over all positions equals the masked mean
    because the text is alone and unpadded."""
    import torch

    class MeanPooled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = body

        def forward(self, first: Any, attention_mask: Any) -> Any:
            out = self.inner(**{first_input: first}, attention_mask=attention_mask,
                             return_dict=True)
            return out.last_hidden_state.mean(dim=1)

    return MeanPooled().eval()


def _preprocess(model: Any) -> Any:
    return getattr(model, "preprocess", None) or model.tokenize


class OnnxSingle(SingleText):
    kind = "onnx"

    def __init__(self, model: Any, session: Any, table: Any) -> None:
        self._preprocess = _preprocess(model)
        self._session = session
        self._table = table  # (vocab, hidden) float32, a view of the loaded model's weights

    @classmethod
    def build(cls, model: Any, body: Any, threads: int) -> OnnxSingle:
        import onnxruntime as ort
        import torch

        embeddings = body.get_input_embeddings()
        features = _preprocess(model)([_PROBE_TEXT])
        buffer = io.BytesIO()
        with torch.inference_mode(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the exporter's notes on shape-dependent branches
            sample = embeddings(features["input_ids"]).detach()
            torch.onnx.export(_mean_pooled(body, "inputs_embeds"),
                              (sample, features["attention_mask"]), buffer,
                              input_names=["inputs_embeds", "attention_mask"],
                              output_names=["embedding"],
                              dynamic_axes={"inputs_embeds": {1: "tokens"},
                                            "attention_mask": {1: "tokens"}},
                              opset_version=17, do_constant_folding=True, dynamo=False)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3  # its warnings about unused initializers go to stderr
        session = ort.InferenceSession(buffer.getvalue(), options,
                                       providers=["CPUExecutionProvider"])
        return cls(model, session, embeddings.weight.detach().numpy())

    def __call__(self, text: str) -> Any:
        features = self._preprocess([text])
        ids = features["input_ids"].numpy()
        mask = features["attention_mask"].numpy().astype("int64", copy=False)
        return self._session.run(None, {"inputs_embeds": self._table[ids],
                                        "attention_mask": mask})[0][0]


class TorchScriptSingle(SingleText):
    kind = "torchscript"

    def __init__(self, model: Any, graph: Any) -> None:
        self._preprocess = _preprocess(model)
        self._graph = graph

    @classmethod
    def build(cls, model: Any, body: Any, threads: int) -> TorchScriptSingle:
        import torch

        features = _preprocess(model)([_PROBE_TEXT])
        with torch.inference_mode(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tracer's notes on shape-dependent branches
            traced = torch.jit.trace(_mean_pooled(body, "input_ids"), (features["input_ids"],
                                                      features["attention_mask"]),
                                     strict=False, check_trace=False)
            # freeze alone: optimize_for_inference measured no faster here, and costs memory.
            graph = torch.jit.freeze(traced.eval())
        return cls(model, graph)

    def __call__(self, text: str) -> Any:
        import torch

        features = self._preprocess([text])
        with torch.inference_mode():
            return self._graph(features["input_ids"], features["attention_mask"])[0].numpy()
