"""The background mean and the recall space: shipped sentences, per-model cache, centring."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from memself.errors import CorruptFile
from memself.recall.background import (
    RecallSpace,
    build_background,
    cache_file,
    default_sentences_path,
    load_background,
    load_sentences,
    load_space,
    sentences_digest,
)

REPO_ROOT = Path(__file__).resolve().parent.parent


class CountingEncoder:
    """Wraps the real encoder and counts how many texts it was asked to encode."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dim = inner.dim
        self.calls = 0

    def encode_queries(self, texts):
        self.calls += len(texts)
        return self.inner.encode_queries(texts)

    def encode_passages(self, texts):
        self.calls += len(texts)
        return self.inner.encode_passages(texts)


def test_shipped_sentences_are_generic_and_packaged():
    sentences = load_sentences()
    assert 60 <= len(sentences) <= 100
    assert len(set(sentences)) == len(sentences)
    assert all(6 <= len(s) <= 60 for s in sentences)
    link = REPO_ROOT / "memself" / "data" / "background_sentences.json"
    assert link.is_symlink() and link.resolve() == (REPO_ROOT / "background_sentences.json")
    assert default_sentences_path().resolve() == link.resolve()


@pytest.mark.parametrize(
    "content", ["not json", "{}", '["ok", 3]', json.dumps(["一句"] * 20), json.dumps(["", "a"])]
)
def test_bad_sentence_files_are_refused(tmp_path, content):
    path = tmp_path / "bg.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(CorruptFile):
        load_sentences(path)


def test_space_without_directions_is_plain_centring():
    rng = np.random.default_rng(0)
    v = rng.normal(size=(5, 16)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    mean = v.mean(axis=0)
    space = RecallSpace("m", mean, np.zeros((0, 16), dtype=np.float32))
    c = space.project(v)
    assert c.dtype == np.float32
    assert np.allclose(np.linalg.norm(c, axis=1), 1.0, atol=1e-6)
    expected = (v[2] - mean) / np.linalg.norm(v[2] - mean)
    assert np.allclose(space.project(v[2])[0], expected, atol=1e-6)
    assert np.allclose(c[2], expected, atol=1e-6)


@pytest.mark.full
def test_build_caches_per_model_and_sentence_file(e5_encoder, tmp_path):
    enc = CountingEncoder(e5_encoder)
    bg = build_background(enc, cache_dir=tmp_path)
    sentences = load_sentences()
    assert enc.calls == len(sentences)  # encoded once, on the query side
    assert bg.mean.shape == (384,) and bg.mean.dtype == np.float32
    expected = e5_encoder.encode_queries(sentences).mean(axis=0)
    assert np.allclose(bg.mean, expected, atol=1e-5)
    path = cache_file(enc.model_id, sentences_digest(sentences), tmp_path)
    assert path.is_file() and "multilingual-e5-small" in path.name
    assert np.array_equal(np.load(path), bg.mean)

    enc.calls = 0
    again = load_background(enc, cache_dir=tmp_path)
    assert enc.calls == 0 and np.array_equal(again.mean, bg.mean)

    path.write_bytes(b"corrupt")
    rebuilt = load_background(enc, cache_dir=tmp_path)
    assert enc.calls == len(sentences) and np.allclose(rebuilt.mean, bg.mean, atol=1e-6)

    other = tmp_path / "other.json"
    other.write_text(json.dumps(sentences[:20], ensure_ascii=False), encoding="utf-8")
    enc.calls = 0
    smaller = load_background(enc, cache_dir=tmp_path, sentences_path=other)
    assert enc.calls == 20 and smaller.digest != bg.digest
    assert len(list((tmp_path / "backgrounds").glob("*.npy"))) == 2


def test_build_accepts_a_model_name(model_cache, e5_encoder):
    # One cache for models and their backgrounds: $MEMSELF_MODEL_CACHE (the shared test cache).
    bg = build_background("multilingual-e5-small")
    assert bg.model_id == "multilingual-e5-small"
    expected = e5_encoder.encode_queries(load_sentences()).mean(axis=0)
    assert np.allclose(bg.mean, expected, atol=1e-5)
    assert cache_file(bg.model_id, bg.digest).parent == model_cache / "backgrounds"


def test_mean_only_space_shares_the_background_cache(e5_encoder, tmp_path):
    enc = CountingEncoder(e5_encoder)
    bg = load_background(enc, cache_dir=tmp_path)
    enc.calls = 0
    space = load_space(enc, 0, False, cache_dir=tmp_path)
    assert enc.calls == 0 and np.array_equal(space.mean, bg.mean)
    assert space.components.shape == (0, enc.dim)
    assert len(list((tmp_path / "backgrounds").glob("*.npy"))) == 1
    load_space(enc, 0, False, cache_dir=tmp_path, rebuild=True)
    assert enc.calls == len(load_sentences())


def test_centring_spreads_e5_scores(e5_encoder, tmp_path):
    """Raw e5 cosines of unrelated texts sit near 0.8; centred, they drop while a match stays."""
    space = load_space(e5_encoder, 0, False, cache_dir=tmp_path)
    memories = e5_encoder.encode_passages(
        [
            "改完代码不要自动 git commit，由我来提交",
            "订单服务的数据库是 PostgreSQL 14，连接串在 config/db.yaml",
            "周报每周五下午五点前发给组长",
        ]
    )
    query = e5_encoder.encode_queries(["这次修改完别帮我提交，我自己 commit"])[0]
    raw = memories @ query
    centred = space.project(memories) @ space.project(query)[0]
    assert raw[1:].min() > 0.7  # the anisotropy centring exists to remove
    assert centred[1:].max() < raw[1:].min() - 0.3
    assert centred[0] > centred[1:].max() + 0.15
