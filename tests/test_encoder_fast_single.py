"""The compiled single-text paths of the encoder (the engine turns one on for prompts) give the
eager path's vectors: recall thresholds are calibrated on those."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

TEXTS = ["a", "支付页新流程的灰度开关叫什么", "Go 里面错误怎么包装",
         "讲讲 TCP 的拥塞控制算法 and mixed English words, numbers 12345 and emoji 🙂",
         "上线前先在预发环境验证灰度开关，再通知值班同学。" * 30,  # past 512 tokens: truncated
         "   ", "x" * 3]


@pytest.mark.parametrize("kind", ["onnx", "torchscript"])
def test_fast_single_matches_the_eager_path(shared_model_cache: Path, kind: str) -> None:
    from memself.encoder import load_encoder

    encoder = load_encoder("multilingual-e5-small", shared_model_cache)
    eager_queries = encoder.encode_queries(TEXTS)  # a batch: eager, padded
    eager_single = np.vstack([encoder.encode_queries([t]) for t in TEXTS])
    eager_passage = encoder.encode_passages([TEXTS[1]])
    assert encoder.enable_fast_single([kind]) == kind
    assert encoder._single is not None and encoder._single.kind == kind
    fast = np.vstack([encoder.encode_queries([t]) for t in TEXTS])
    assert fast.shape == (len(TEXTS), encoder.dim)
    assert np.allclose(np.linalg.norm(fast, axis=1), 1.0, atol=1e-5)
    assert float((fast * eager_single).sum(axis=1).min()) > 0.99999
    assert float((fast * eager_queries).sum(axis=1).min()) > 0.99999
    # Passages keep their prefix on the fast path too.
    passage = encoder.encode_passages([TEXTS[1]])
    assert float((passage * eager_passage).sum()) > 0.99999
    assert float((passage * fast[1]).sum()) < 0.9999  # "passage: " is not "query: "
    # Batches still take the eager path and give the same vectors as before.
    assert np.allclose(encoder.encode_queries(TEXTS), eager_queries, atol=1e-6)


def test_onnx_is_preferred_and_a_path_that_differs_is_skipped(
        shared_model_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memself import fast_single
    from memself.encoder import load_encoder

    encoder = load_encoder("multilingual-e5-small", shared_model_cache)
    assert encoder.enable_fast_single() == "onnx"

    # A path whose vectors differ from the eager path's must never be used.
    real_call = fast_single.OnnxSingle.__call__
    monkeypatch.setattr(fast_single.OnnxSingle, "__call__",
                        lambda self, text: real_call(self, text)[::-1].copy())
    fresh = load_encoder("multilingual-e5-small", shared_model_cache)
    assert fresh.enable_fast_single() == "torchscript"
    assert fresh.enable_fast_single(["onnx"]) == ""
    assert fresh._single is not None and fresh._single.kind == "torchscript"


def test_a_missing_onnxruntime_falls_back(shared_model_cache: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from memself.encoder import load_encoder

    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import raises ImportError
    encoder = load_encoder("multilingual-e5-small", shared_model_cache)
    assert encoder.enable_fast_single() == "torchscript"


@pytest.mark.parametrize(("setting", "kinds"), [
    ("", ("onnx", "torchscript")), ("1", ("onnx", "torchscript")), ("0", ()),
    (" onnx ", ("onnx",)), ("TorchScript", ("torchscript",)), ("fast", ("onnx", "torchscript"))])
def test_engine_setting_picks_the_paths(setting: str, kinds: tuple[str, ...]) -> None:
    from memself.engine.service import fast_single_kinds

    assert fast_single_kinds(setting) == kinds


def test_prompt_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from memself.encoder import THREADS_ENV, prompt_threads

    monkeypatch.delenv(THREADS_ENV, raising=False)
    assert prompt_threads() == min(2, os.cpu_count() or 1)
    monkeypatch.setenv(THREADS_ENV, "1")
    assert prompt_threads() == 1
