"""The binary vector index: one raw unit vector per memory, keyed by id and content hash.

Files in ``<data dir>/index/``:

- ``header.json``: ``{"format", "version", "model", "dim", "count", "generation", "vectors",
  "ids", "hashes"}``, written last; it names the generation's three array files.
- ``vectors-<gen>.npy``: float32 ``(count, dim)``, raw (not centred) unit vectors of the passages.
- ``ids-<gen>.npy``: the memory ids, row order. ``hashes-<gen>.npy``: sha256 (first 32 hex) of
  each memory's text, so unchanged text is never re-encoded.

Why generations: the header is replaced atomically after the arrays it names are on disk, so a
reader sees the old index or the new one, never a mix. Old generation files are removed after the
switch (a reader that memory-mapped them keeps its inode on POSIX).

The index never owns a memory: the store does. A corrupt or mismatched index is treated as empty
and rebuilt from the store; a text that fails to encode stays out of the index and is retried on
the next sync. Vectors are raw so a new background mean needs no re-encoding; ``scores`` centres on
the fly (see there).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import secrets
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from memself.atomic import write_atomic
from memself.errors import LockTimeout
from memself.logs import log
from memself.models import DEFAULT_MODEL
from memself.paths import DataPaths

if TYPE_CHECKING:
    import numpy as np

    from memself.encoder import Encoder

FORMAT = "memself-vector-index"
VERSION = 1
HEADER = "header.json"
LOCK = ".lock"
LEGACY_MARKER = ".legacy-imported"
# The original's embeddings.jsonl: EMBED_VERSION 4 = bge-base-zh, body text only, mean pooling.
LEGACY_EV = 4
LEGACY_MODEL = DEFAULT_MODEL
KEEP_BACKUPS = 3
LOCK_TIMEOUT_S = 60.0
_BATCH = 64
_GIVE_UP_AFTER = 3


class HasText(Protocol):
    """What the index needs of a memory (``memself.records.Memory`` fits)."""

    @property
    def id(self) -> str: ...

    @property
    def text(self) -> str: ...


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


@dataclass
class SyncResult:
    """What one sync or rebuild did; ``failed`` ids stay unindexed until a later sync."""

    encoded: int = 0
    removed: int = 0
    imported: int = 0
    failed: list[str] = field(default_factory=list)
    rebuilt_reason: str = ""  # why the whole index was re-encoded ("", "model", "corrupt", ...)
    backup: Path | None = None
    written: bool = False


class VectorIndex:
    """The loaded index of one data directory. Not thread-safe; the engine owns one."""

    def __init__(self, directory: Path, legacy_file: Path | None = None,
                 paths: DataPaths | None = None) -> None:
        import numpy as np

        self.directory = directory
        self.legacy_file = legacy_file if legacy_file is not None else (
            directory.parent / "embeddings.jsonl")
        self._paths = paths
        self.model_id: str | None = None
        self.dim = 0
        self.generation = ""
        self.matrix: np.ndarray = np.zeros((0, 0), dtype=np.float32)
        self._ids: np.ndarray = np.zeros(0, dtype="U1")
        self._hashes: np.ndarray = np.zeros(0, dtype="S32")
        self._id_list: list[str] | None = None
        self._rows: dict[str, int] | None = None
        self._norm_cache: tuple[bytes, np.ndarray] | None = None
        # Why the last load found no usable index ("" = fine or simply absent).
        self.problem = ""

    # ------------------------------------------------------------------ loading

    @classmethod
    def for_paths(cls, paths: DataPaths, mmap: bool = True) -> VectorIndex:
        index = cls(paths.index_dir, paths.legacy_embeddings, paths)
        index.reload(mmap=mmap)
        return index

    @classmethod
    def load(cls, directory: Path, legacy_file: Path | None = None,
             mmap: bool = True) -> VectorIndex:
        index = cls(directory, legacy_file)
        index.reload(mmap=mmap)
        return index

    def reload(self, mmap: bool = True) -> None:
        """Read the index from disk; a missing or corrupt one loads as empty (see ``problem``)."""
        state = _read_state(self.directory, mmap)
        self._set(state)

    def reload_if_changed(self, mmap: bool = True) -> bool:
        """Reload when another process wrote a new generation; True if it did."""
        header = _read_header(self.directory)
        gen = header.get("generation", "") if isinstance(header, dict) else ""
        if gen == self.generation:
            return False
        self.reload(mmap=mmap)
        return True

    def _set(self, state: _State) -> None:
        self.model_id = state.model_id
        self.dim = state.dim
        self.generation = state.generation
        self.matrix = state.vectors
        self._ids = state.ids
        self._hashes = state.hashes
        self.problem = state.problem
        self._id_list = None
        self._rows = None
        self._norm_cache = None

    # ------------------------------------------------------------------ reading

    def __len__(self) -> int:
        return int(self.matrix.shape[0])

    @property
    def ids(self) -> list[str]:
        """Memory ids in row order."""
        if self._id_list is None:
            self._id_list = [str(x) for x in self._ids.tolist()]
        return self._id_list

    def row_of(self, mem_id: str) -> int | None:
        if self._rows is None:
            self._rows = {mid: i for i, mid in enumerate(self.ids)}
        return self._rows.get(mem_id)

    def rows(self, ids: Sequence[str]) -> np.ndarray:
        """Row numbers of ``ids`` (int64), -1 where an id has no vector."""
        import numpy as np

        found = [self.row_of(mid) for mid in ids]
        return np.array([-1 if r is None else r for r in found], dtype=np.int64)

    def vector(self, mem_id: str) -> np.ndarray | None:
        row = self.row_of(mem_id)
        return None if row is None else self.matrix[row]

    def is_current(self, memory: HasText) -> bool:
        """True when the memory has a vector for its present text."""
        row = self.row_of(memory.id)
        return row is not None and self._hashes[row].decode("ascii") == text_hash(memory.text)

    def missing(self, memories: Iterable[HasText]) -> list[str]:
        """Ids of memories whose vector is absent or stale (their text changed)."""
        return [m.id for m in memories if not self.is_current(m)]

    def scores(self, query_centred: np.ndarray, mean: np.ndarray) -> np.ndarray:
        """Centred cosine of one centred query with every row, aligned with ``ids``.

        Equal to ``centre(matrix, mean) @ query_centred`` without building the centred matrix:
        for unit rows p, ``|p - mean|^2 = 1 - 2 p.mean + |mean|^2``, so one matrix-vector product
        per query plus a cached per-row norm (one more product per new mean) suffices.
        """
        import numpy as np

        if len(self) == 0:
            return np.zeros(0, dtype=np.float32)
        q = np.asarray(query_centred, dtype=np.float32)
        mu = np.asarray(mean, dtype=np.float32)
        norms = self._centred_norms(mu)
        raw = self.matrix @ q
        return ((raw - np.float32(q @ mu)) / norms).astype(np.float32, copy=False)

    def _centred_norms(self, mu: np.ndarray) -> np.ndarray:
        import numpy as np

        key = mu.tobytes()
        if self._norm_cache is None or self._norm_cache[0] != key:
            sq = 1.0 - 2.0 * (self.matrix @ mu) + np.float32(mu @ mu)
            self._norm_cache = (key, np.sqrt(np.maximum(sq, 1e-12)).astype(np.float32))
        return self._norm_cache[1]

    # ------------------------------------------------------------------ writing

    def sync(self, memories: Iterable[HasText], encoder: Encoder) -> SyncResult:
        """Make the index hold exactly ``memories`` (pass every memory of both groups).

        Only new or changed texts are encoded; ids not passed are dropped; a different model or
        dimension re-encodes everything; the original's embeddings.jsonl is imported once when the
        model is bge-base-zh. Encoding runs outside the index lock; the write re-reads the disk
        under the lock so a concurrent writer's rows are merged, not lost.
        """
        memories = list(memories)
        wanted = _wanted(memories)
        result = SyncResult()
        self.reload_if_changed()
        if (not self.problem and self.model_id == encoder.model_id and self.dim == encoder.dim
                and len(self) == len(wanted) and not self.missing(memories)):
            return result
        base = self._current_state()
        if self.problem:
            result.rebuilt_reason = "corrupt"
            log(self._paths, "index.corrupt", reason=self.problem)
        elif base.model_id is not None and (base.model_id != encoder.model_id
                                            or base.dim != encoder.dim):
            result.rebuilt_reason = "model"
            log(self._paths, "index.model_changed", old=base.model_id, new=encoder.model_id)
        have = base.rows_for(encoder) if not result.rebuilt_reason else {}
        if not have and base.model_id is None and not self.problem:
            have = self._legacy_rows(wanted, encoder, result)
        todo = [(mid, text, h) for mid, (text, h) in wanted.items()
                if have.get(mid, (None, ""))[1] != h]
        fresh = self._encode(todo, encoder, result)
        return self._commit(wanted, have, fresh, encoder, result, backup_stamp=None)

    def rebuild(self, memories: Iterable[HasText], encoder: Encoder, now: datetime) -> SyncResult:
        """Re-encode every memory; the previous files move to ``backup-<time>/`` first."""
        wanted = _wanted(memories)
        result = SyncResult(rebuilt_reason="requested")
        todo = [(mid, text, h) for mid, (text, h) in wanted.items()]
        fresh = self._encode(todo, encoder, result)
        return self._commit(wanted, {}, fresh, encoder, result,
                            backup_stamp=now.strftime("%Y%m%dT%H%M%S"))

    # ------------------------------------------------------------------ internals

    def _current_state(self) -> _State:
        return _State(self.model_id, self.dim, self.generation, self.matrix, self._ids,
                      self._hashes, self.problem)

    def _encode(self, todo: list[tuple[str, str, str]], encoder: Encoder,
                result: SyncResult) -> dict[str, tuple[np.ndarray, str]]:
        """Encode in batches; a failing batch is retried text by text so one bad text fails alone."""
        fresh: dict[str, tuple[np.ndarray, str]] = {}
        streak = 0  # consecutive single-text failures: the encoder itself is broken
        for start in range(0, len(todo), _BATCH):
            batch = todo[start:start + _BATCH]
            if streak >= _GIVE_UP_AFTER:
                result.failed.extend(mid for mid, _, _ in batch)
                continue
            try:
                vecs = _checked(encoder.encode_passages([t for _, t, _ in batch]), len(batch),
                                encoder.dim)
            except Exception as exc:  # any encoder failure must not cost a memory
                log(self._paths, "index.encode_batch_failed", count=len(batch),
                    error=type(exc).__name__)
                vecs = None
            if vecs is not None:
                for (mid, _, h), v in zip(batch, vecs, strict=True):
                    fresh[mid] = (v, h)
                continue
            for mid, text, h in batch:
                try:
                    one = _checked(encoder.encode_passages([text]), 1, encoder.dim)
                except Exception as exc:
                    log(self._paths, "index.encode_failed", id=mid, error=type(exc).__name__)
                    result.failed.append(mid)
                    streak += 1
                    if streak >= _GIVE_UP_AFTER:
                        break
                    continue
                streak = 0
                fresh[mid] = (one[0], h)
            if streak >= _GIVE_UP_AFTER:
                done = set(fresh) | set(result.failed)
                result.failed.extend(mid for mid, _, _ in batch if mid not in done)
        result.encoded = len(fresh)
        return fresh

    def _legacy_rows(self, wanted: dict[str, tuple[str, str]], encoder: Encoder,
                     result: SyncResult) -> dict[str, tuple[np.ndarray, str]]:
        """The original's vectors for memories still present, once, and only for bge-base-zh."""
        if encoder.model_id != LEGACY_MODEL or (self.directory / LEGACY_MARKER).exists():
            return {}
        rows = read_legacy_embeddings(self.legacy_file, encoder.dim)
        # Vectors carry no text hash; the original re-encoded on every text change, so a vector
        # belongs to the memory's present text.
        out = {mid: (rows[mid], wanted[mid][1]) for mid in wanted if mid in rows}
        result.imported = len(out)
        if rows:
            log(self._paths, "index.legacy_import", vectors=len(rows), used=len(out))
        return out

    def _commit(self, wanted: dict[str, tuple[str, str]], have: dict[str, tuple[np.ndarray, str]],
                fresh: dict[str, tuple[np.ndarray, str]], encoder: Encoder, result: SyncResult,
                backup_stamp: str | None) -> SyncResult:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        with _locked(self.directory):
            disk = _read_state(self.directory, mmap=True)
            disk_rows = disk.rows_for(encoder) if backup_stamp is None else {}
            order = list(self.ids) if not result.rebuilt_reason else []
            merged: dict[str, tuple[np.ndarray, str]] = {}
            for mid, (_text, h) in wanted.items():
                for source in (fresh, disk_rows, have):
                    got = source.get(mid)
                    if got is not None and got[1] == h:
                        merged[mid] = got
                        break
            # Keep the existing row order and append new ids: a re-sorted store is not a change.
            seen = set(order)
            final_ids = [m for m in order if m in merged] + [m for m in wanted if m in merged
                                                               and m not in seen]
            unchanged = (not disk.problem and disk.model_id == encoder.model_id
                         and disk.dim == encoder.dim and backup_stamp is None
                         and _same(disk, final_ids, merged))
            removed_ids = set(disk.id_list()) - set(final_ids) if disk.model_id else set()
            result.removed = len(removed_ids)
            if unchanged:
                self._set(disk)
                return result
            state = _write_generation(self.directory, encoder, final_ids, merged,
                                      backup_stamp, result)
            if result.imported:
                write_atomic(self.directory / LEGACY_MARKER, "imported\n")
            result.written = True
            self._set(state)
            log(self._paths, "index.written", count=len(final_ids), encoded=result.encoded,
                removed=result.removed, imported=result.imported, failed=len(result.failed),
                reason=result.rebuilt_reason or "sync")
        return result


# ---------------------------------------------------------------------- on-disk state


@dataclass
class _State:
    model_id: str | None
    dim: int
    generation: str
    vectors: Any
    ids: Any
    hashes: Any
    problem: str = ""

    def id_list(self) -> list[str]:
        return [str(x) for x in self.ids.tolist()]

    def rows_for(self, encoder: Encoder) -> dict[str, tuple[np.ndarray, str]]:
        """Rows usable with ``encoder`` (same model and dimension), else none."""
        if self.problem or self.model_id != encoder.model_id or self.dim != encoder.dim:
            return {}
        hashes = [h.decode("ascii") for h in self.hashes.tolist()]
        return {mid: (self.vectors[i], hashes[i]) for i, mid in enumerate(self.id_list())}


def _empty_state(problem: str = "") -> _State:
    import numpy as np

    return _State(None, 0, "", np.zeros((0, 0), dtype=np.float32), np.zeros(0, dtype="U1"),
                  np.zeros(0, dtype="S32"), problem)


def _read_header(directory: Path) -> object:
    try:
        return json.loads((directory / HEADER).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        return {"_error": f"header: {type(exc).__name__}"}


def _read_state(directory: Path, mmap: bool) -> _State:
    import numpy as np

    header = _read_header(directory)
    if header is None:
        return _empty_state()
    try:
        if not isinstance(header, dict) or "_error" in header:
            raise ValueError(header.get("_error", "header") if isinstance(header, dict)
                             else "header")
        if header.get("format") != FORMAT or header.get("version") != VERSION:
            raise ValueError("format/version")
        model, dim, count = header["model"], int(header["dim"]), int(header["count"])
        names = [str(header[k]) for k in ("vectors", "ids", "hashes")]
        if any("/" in n or "\\" in n or n.startswith(".") for n in names):
            raise ValueError("file name")
        vectors = np.load(directory / names[0], mmap_mode="r" if mmap else None,
                          allow_pickle=False)
        ids = np.load(directory / names[1], allow_pickle=False)
        hashes = np.load(directory / names[2], allow_pickle=False)
        if vectors.dtype != np.float32 or vectors.shape != (count, dim):
            raise ValueError(f"vectors {vectors.dtype} {vectors.shape} != ({count}, {dim})")
        if ids.shape != (count,) or hashes.shape != (count,) or ids.dtype.kind != "U" \
                or hashes.dtype != np.dtype("S32"):
            raise ValueError("ids/hashes shape")
        if len(set(ids.tolist())) != count:
            raise ValueError("duplicate ids")
        if not isinstance(model, str) or not model or dim <= 0:
            raise ValueError("model/dim")
    except (OSError, ValueError, KeyError, TypeError, EOFError) as exc:
        return _empty_state(problem=str(exc)[:200] or type(exc).__name__)
    return _State(model, dim, str(header.get("generation", "")), vectors, ids, hashes)


def _same(disk: _State, final_ids: list[str], merged: dict[str, tuple[Any, str]]) -> bool:
    if disk.id_list() != final_ids:
        return False
    hashes = [h.decode("ascii") for h in disk.hashes.tolist()]
    return all(merged[mid][1] == hashes[i] for i, mid in enumerate(final_ids))


def _write_generation(directory: Path, encoder: Encoder, final_ids: list[str],
                      merged: dict[str, tuple[Any, str]], backup_stamp: str | None,
                      result: SyncResult) -> _State:
    """Write the arrays, back up the old generation if asked, then switch the header."""
    import numpy as np

    gen = secrets.token_hex(6)
    dim = encoder.dim
    vectors = np.zeros((len(final_ids), dim), dtype=np.float32)
    for i, mid in enumerate(final_ids):
        vectors[i] = merged[mid][0]
    ids = np.array(final_ids, dtype=f"U{max([len(m) for m in final_ids] + [1])}")
    hashes = np.array([merged[mid][1] for mid in final_ids], dtype="S32")
    names = {"vectors": f"vectors-{gen}.npy", "ids": f"ids-{gen}.npy",
             "hashes": f"hashes-{gen}.npy"}
    for key, array in (("vectors", vectors), ("ids", ids), ("hashes", hashes)):
        _save_npy(directory / names[key], array)
    # The old files are still live until the header switches, so the backup links them rather
    # than moving them: a reader never finds the index missing.
    if backup_stamp is not None:
        result.backup = _backup(directory, backup_stamp, exclude=gen)
    header = {"format": FORMAT, "version": VERSION, "model": encoder.model_id, "dim": dim,
              "count": len(final_ids), "generation": gen, **names}
    write_atomic(directory / HEADER, json.dumps(header, ensure_ascii=False, indent=2) + "\n")
    _remove_other_generations(directory, gen)
    return _State(encoder.model_id, dim, gen, vectors, ids, hashes)


def _save_npy(path: Path, array: Any) -> None:
    import io

    import numpy as np

    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    write_atomic(path, buf.getvalue())


def _remove_other_generations(directory: Path, keep: str) -> None:
    for path in directory.iterdir():
        if _is_array_file(path) and not path.stem.endswith(f"-{keep}"):
            with contextlib.suppress(OSError):
                path.unlink()


def _is_array_file(path: Path) -> bool:
    return path.is_file() and path.suffix == ".npy" and \
        path.name.split("-", 1)[0] in {"vectors", "ids", "hashes"}


def _backup(directory: Path, stamp: str, exclude: str) -> Path | None:
    """Hard-link (or copy) the current header and arrays into ``backup-<stamp>/``; keep a few."""
    files = [p for p in directory.iterdir()
             if p.name == HEADER or (_is_array_file(p) and not p.stem.endswith(f"-{exclude}"))]
    if not files:
        return None
    target = directory / f"backup-{stamp}"
    n = 1
    while target.exists():
        n += 1
        target = directory / f"backup-{stamp}-{n}"
    target.mkdir(mode=0o700)
    for path in files:
        try:
            os.link(path, target / path.name)
        except OSError:
            shutil.copy2(path, target / path.name)
    backups = sorted((p for p in directory.iterdir() if p.is_dir() and p.name.startswith("backup-")),
                     key=lambda p: p.stat().st_mtime_ns)
    for old in backups[:-KEEP_BACKUPS]:
        shutil.rmtree(old, ignore_errors=True)
    return target


@contextlib.contextmanager
def _locked(directory: Path) -> Any:
    from filelock import FileLock, Timeout

    lock = FileLock(str(directory / LOCK), timeout=LOCK_TIMEOUT_S)
    try:
        with lock:
            yield
    except Timeout as exc:
        raise LockTimeout(f"向量索引正被另一个进程写入（等待 {LOCK_TIMEOUT_S:.0f} 秒仍未释放）："
                          f"{directory}") from exc


# ---------------------------------------------------------------------- helpers


def _wanted(memories: Iterable[HasText]) -> dict[str, tuple[str, str]]:
    """id -> (text, hash), in the order given; a repeated id keeps its last text."""
    out: dict[str, tuple[str, str]] = {}
    for m in memories:
        if m.id and isinstance(m.text, str):
            out[m.id] = (m.text, text_hash(m.text))
    return out


def _checked(vecs: Any, n: int, dim: int) -> np.ndarray:
    import numpy as np

    arr = np.asarray(vecs, dtype=np.float32)
    if arr.shape != (n, dim) or not np.isfinite(arr).all():
        raise ValueError(f"encoder returned {arr.shape}, expected ({n}, {dim})")
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    if (norms < 1e-6).any():
        raise ValueError("zero vector")
    return arr / norms


def read_legacy_embeddings(path: Path, dim: int) -> dict[str, np.ndarray]:
    """``{"id","v","ev":4}`` lines of the original's embeddings.jsonl; bad lines are skipped."""
    import numpy as np

    out: dict[str, np.ndarray] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return out
    for line in text.splitlines():
        try:
            raw = json.loads(line)
        except ValueError:
            continue
        if not isinstance(raw, dict) or raw.get("ev") != LEGACY_EV:
            continue
        mid, vec = raw.get("id"), raw.get("v")
        if not isinstance(mid, str) or not isinstance(vec, list) or len(vec) != dim:
            continue
        if not all(isinstance(x, (int, float)) and math.isfinite(x) for x in vec):
            continue
        arr = np.asarray(vec, dtype=np.float32)
        norm = float(np.linalg.norm(arr))
        if norm > 1e-6:
            out[mid] = arr / norm
    return out
