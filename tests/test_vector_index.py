"""The binary vector index: incremental, model-aware, crash- and corruption-proof, with backups."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from memself.index.files import HEADER, text_hash
from memself.index.legacy import LEGACY_MARKER
from memself.index.sync import VectorIndex
from memself.paths import DataPaths
from memself.recall.background import load_space
from memself.recall.scoring import Recaller, ScoringSettings
from memself.store.memory_store import MemoryStore

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=timezone.utc)


@dataclass
class Mem:
    id: str
    text: str


class FakeEncoder:
    """Deterministic vectors from the text hash; records what it encoded; can be made to fail."""

    def __init__(
        self, model_id: str = "fake-a", dim: int = 8, fail_on: str | None = None, broken: bool = False
    ) -> None:
        self.model_id = model_id
        self.dim = dim
        self.fail_on = fail_on
        self.broken = broken
        self.seen: list[str] = []

    def _vec(self, text: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha256(f"{self.model_id}|{text}".encode()).digest()[:8], "big")
        v = np.random.default_rng(seed).normal(size=self.dim).astype(np.float32)
        return v / np.linalg.norm(v)

    def encode_passages(self, texts):
        if self.broken:
            raise RuntimeError("model crashed")
        if self.fail_on and any(self.fail_on in t for t in texts):
            raise RuntimeError("cannot encode this one")
        self.seen.extend(texts)
        return np.stack([self._vec(t) for t in texts]) if texts else np.zeros((0, self.dim))

    def encode_queries(self, texts):
        return self.encode_passages(texts)


def mems(*pairs: tuple[str, str]) -> list[Mem]:
    return [Mem(i, t) for i, t in pairs]


@pytest.fixture
def index_dir(tmp_path: Path) -> Path:
    return tmp_path / "data" / "index"


def three() -> list[Mem]:
    return mems(("m1", "回答用中文"), ("m2", "改完不要自动 commit"), ("m3", "周报周五发"))


def test_sync_encodes_only_new_or_changed_text(index_dir):
    enc = FakeEncoder()
    idx = VectorIndex.load(index_dir)
    first = idx.sync(three(), enc)
    assert (first.encoded, first.written, len(idx)) == (3, True, 3)
    gen = idx.generation

    enc.seen.clear()
    again = idx.sync(list(reversed(three())), enc)  # a re-sorted store is not a change
    assert (again.encoded, again.written, enc.seen, idx.generation) == (0, False, [], gen)

    changed = three()
    changed[1] = Mem("m2", "改完代码不要自动 commit")
    changed.append(Mem("m4", "新的一条项目事实"))
    del changed[0]
    result = idx.sync(changed, enc)
    assert sorted(enc.seen) == sorted(["改完代码不要自动 commit", "新的一条项目事实"])
    assert (result.encoded, result.removed) == (2, 1)
    assert idx.ids == ["m2", "m3", "m4"]
    assert idx.row_of("m1") is None and list(idx.rows(["m4", "m1"])) == [2, -1]
    assert np.allclose(idx.vector("m2"), enc._vec("改完代码不要自动 commit"))
    assert idx.missing(changed) == [] and idx.missing([Mem("m3", "edited")]) == ["m3"]


def test_index_round_trips_through_disk(index_dir):
    enc = FakeEncoder()
    VectorIndex.load(index_dir).sync(three(), enc)
    header = json.loads((index_dir / HEADER).read_text())
    assert header["model"] == "fake-a" and header["dim"] == 8 and header["count"] == 3
    assert sorted(p.name for p in index_dir.glob("*.npy")) == sorted(
        [header["vectors"], header["ids"], header["hashes"]]
    )
    for mmap in (True, False):
        loaded = VectorIndex.load(index_dir, mmap=mmap)
        assert loaded.model_id == "fake-a" and loaded.dim == 8 and loaded.problem == ""
        assert loaded.ids == ["m1", "m2", "m3"]
        assert loaded.matrix.dtype == np.float32
        assert np.allclose(loaded.vector("m3"), enc._vec("周报周五发"))
        assert loaded.missing([Mem("m1", "回答用中文")]) == []
    hashes = np.load(index_dir / header["hashes"])
    assert hashes[0] == text_hash("回答用中文")


def test_model_change_re_encodes_everything(index_dir):
    idx = VectorIndex.load(index_dir)
    idx.sync(three(), FakeEncoder("fake-a"))
    other = FakeEncoder("fake-b")
    result = idx.sync(three(), other)
    assert (result.rebuilt_reason, result.encoded, len(other.seen)) == ("model", 3, 3)
    assert VectorIndex.load(index_dir).model_id == "fake-b"
    smaller = FakeEncoder("fake-b", dim=4)  # same name, other dimension: also a different model
    result = idx.sync(three(), smaller)
    assert result.rebuilt_reason == "model" and idx.matrix.shape == (3, 4)


def _corrupt_header(d: Path) -> None:
    (d / HEADER).write_text("{not json")


def _truncate_vectors(d: Path) -> None:
    path = d / json.loads((d / HEADER).read_text())["vectors"]
    path.write_bytes(path.read_bytes()[:100])


def _wrong_count(d: Path) -> None:
    header = json.loads((d / HEADER).read_text())
    header["count"] = 7
    (d / HEADER).write_text(json.dumps(header))


def _missing_ids(d: Path) -> None:
    (d / json.loads((d / HEADER).read_text())["ids"]).unlink()


def _pickled_ids(d: Path) -> None:
    path = d / json.loads((d / HEADER).read_text())["ids"]
    np.save(path, np.array([{"a": 1}, 2, 3], dtype=object), allow_pickle=True)


@pytest.mark.parametrize(
    "damage", [_corrupt_header, _truncate_vectors, _wrong_count, _missing_ids, _pickled_ids]
)
def test_corrupt_index_is_rebuilt_and_memories_survive(tmp_path, damage):
    paths = DataPaths(tmp_path / "data")
    store = MemoryStore(paths)
    for text, group in (("回答一律用中文", "rule"), ("支付页灰度开关是 pay_new_flow", "project")):
        store.create(text, group, NOW)
    memories = store.all()
    before = {g: paths.group_file(g).read_bytes() for g in ("rule", "project")}
    enc = FakeEncoder()
    VectorIndex.for_paths(paths).sync(memories, enc)
    damage(paths.index_dir)

    idx = VectorIndex.for_paths(paths)
    assert len(idx) == 0 and idx.problem
    enc.seen.clear()
    result = idx.sync(memories, enc)
    assert result.rebuilt_reason == "corrupt" and result.encoded == 2 and len(enc.seen) == 2
    fresh = VectorIndex.for_paths(paths)
    assert fresh.problem == "" and sorted(fresh.ids) == sorted(m.id for m in memories)
    assert {g: paths.group_file(g).read_bytes() for g in ("rule", "project")} == before


def test_encoding_failure_loses_nothing_and_is_retried(index_dir):
    idx = VectorIndex.load(index_dir)
    memories = [*three(), Mem("m9", "BOOM 这条编码会失败")]
    result = idx.sync(memories, FakeEncoder(fail_on="BOOM"))
    assert result.failed == ["m9"] and sorted(idx.ids) == ["m1", "m2", "m3"]
    assert idx.missing(memories) == ["m9"]
    retry = idx.sync(memories, FakeEncoder())
    assert retry.encoded == 1 and idx.missing(memories) == []


def test_broken_model_keeps_the_old_index(index_dir):
    idx = VectorIndex.load(index_dir)
    idx.sync(three(), FakeEncoder())
    gen = idx.generation
    many = three() + [Mem(f"n{i}", f"第 {i} 条新记忆") for i in range(200)]
    result = idx.sync(many, FakeEncoder(broken=True))
    assert len(result.failed) == 200 and result.encoded == 0
    # Existing vectors stay; nothing was thrown away because the model failed.
    loaded = VectorIndex.load(index_dir)
    assert sorted(loaded.ids) == ["m1", "m2", "m3"] and loaded.generation == gen


def test_rebuild_backs_up_the_old_files_and_keeps_three(index_dir):
    idx = VectorIndex.load(index_dir)
    idx.sync(three(), FakeEncoder())
    old_header = (index_dir / HEADER).read_text()
    old_vectors = np.load(index_dir / json.loads(old_header)["vectors"])
    reader = VectorIndex.load(index_dir)  # a reader holding the old generation (memory-mapped)

    enc = FakeEncoder()
    result = idx.rebuild(three(), enc, NOW)
    assert result.encoded == 3 and len(enc.seen) == 3 and result.backup is not None
    assert (result.backup / HEADER).read_text() == old_header
    assert np.array_equal(np.load(result.backup / json.loads(old_header)["vectors"]), old_vectors)
    assert idx.generation != json.loads(old_header)["generation"]
    assert np.allclose(reader.matrix, old_vectors)  # the old reader still reads its rows
    assert reader.reload_if_changed() and reader.generation == idx.generation

    for hours in range(1, 5):
        idx.rebuild(three(), FakeEncoder(), NOW + timedelta(hours=hours))
    backups = sorted(p.name for p in index_dir.iterdir() if p.name.startswith("backup-"))
    assert backups == ["backup-20261130T110000", "backup-20261130T120000", "backup-20261130T130000"]
    # Only the live generation's arrays are left in the index folder itself.
    assert len(list(index_dir.glob("*.npy"))) == 3


def test_two_writers_merge_instead_of_overwriting(index_dir):
    a = VectorIndex.load(index_dir)
    b = VectorIndex.load(index_dir)  # loaded before a writes: stale
    a.sync(three(), FakeEncoder())
    enc = FakeEncoder()
    b.sync([*three(), Mem("m4", "第四条")], enc)
    assert enc.seen == ["第四条"]  # b saw a's new generation and reused its rows
    assert sorted(VectorIndex.load(index_dir).ids) == ["m1", "m2", "m3", "m4"]


def _legacy_line(mid: str, vec: np.ndarray, ev: int = 4) -> str:
    return json.dumps({"id": mid, "v": [float(x) for x in vec], "ev": ev})


def test_legacy_embeddings_imported_once_for_bge(tmp_path):
    paths = DataPaths(tmp_path / "data")
    paths.ensure()
    bge = FakeEncoder("BAAI/bge-base-zh-v1.5", dim=768)
    rng = np.random.default_rng(1)
    v1, v2 = rng.normal(size=768), rng.normal(size=768)
    lines = [
        _legacy_line("m1", v1),
        _legacy_line("m2", v2, ev=3),  # old version: dropped
        _legacy_line("m3", v1[:10]),
        "{broken",
        _legacy_line("gone", v2),
    ]
    paths.legacy_embeddings.write_text("\n".join(lines), encoding="utf-8")
    idx = VectorIndex.for_paths(paths)
    result = idx.sync(three(), bge)
    assert result.imported == 1 and sorted(bge.seen) == sorted(["改完不要自动 commit", "周报周五发"])
    assert np.allclose(idx.vector("m1"), v1 / np.linalg.norm(v1), atol=1e-6)
    assert idx.row_of("gone") is None
    assert (paths.index_dir / LEGACY_MARKER).is_file()

    # Once: a lost index is re-encoded from the store, not re-imported from stale vectors.
    (paths.index_dir / HEADER).unlink()
    bge.seen.clear()
    again = VectorIndex.for_paths(paths).sync(three(), bge)
    assert again.imported == 0 and len(bge.seen) == 3


def test_legacy_embeddings_ignored_for_other_models(tmp_path):
    paths = DataPaths(tmp_path / "data")
    paths.ensure()
    paths.legacy_embeddings.write_text(_legacy_line("m1", np.ones(8)), encoding="utf-8")
    enc = FakeEncoder("multilingual-e5-small", dim=8)
    result = VectorIndex.for_paths(paths).sync(three(), enc)
    assert result.imported == 0 and len(enc.seen) == 3
    assert not (paths.index_dir / LEGACY_MARKER).exists()


def test_real_model_index_ranks_the_relevant_memory_first(e5_encoder, tmp_path):
    paths = DataPaths(tmp_path / "data")
    store = MemoryStore(paths)
    texts = [
        ("改完代码不要自动 git commit，由我来提交", "rule"),
        ("回答一律用中文", "rule"),
        ("订单服务的数据库是 PostgreSQL 14", "project"),
        ("前端用 React 18 和 Vite 构建", "project"),
    ]
    for text, group in texts:
        store.create(text, group, NOW)
    idx = VectorIndex.for_paths(paths)
    result = idx.sync(store.all(), e5_encoder)
    assert result.encoded == 4 and idx.model_id == "multilingual-e5-small" and idx.dim == 384
    # Scored as recall scores the index (plain centring: the original's cosine).
    space = load_space(e5_encoder, 0, False, cache_dir=tmp_path / "models")
    recaller = Recaller(e5_encoder, space, ScoringSettings())
    scores = recaller.dense_scores("订单库用的是哪个数据库版本？", VectorIndex.for_paths(paths).matrix)
    best = idx.ids[int(np.argmax(scores))]
    assert store.get(best).text.startswith("订单服务的数据库")
    # The stored rows are the encoder's passage vectors of the texts.
    row = idx.vector(best)
    assert float(row @ e5_encoder.encode_passages([store.get(best).text])[0]) > 0.9999
