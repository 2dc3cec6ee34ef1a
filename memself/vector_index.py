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
import tempfile
from collections.abc import Callable, Iterable, Sequence
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


def text_hash(text: str) -> bytes:
    """The stored content hash: the first 32 hex digits of sha256, as ASCII bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32].encode("ascii")


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

    def __init__(
        self, directory: Path, legacy_file: Path | None = None, paths: DataPaths | None = None
    ) -> None:
        self.directory = directory
        self.legacy_file = legacy_file if legacy_file is not None else (directory.parent / "embeddings.jsonl")
        # The index lives in <data dir>/index: its log lines belong to that data dir's log, never
        # to the default one (a benchmark or test on a temp index must not touch the user's).
        self._paths = paths or DataPaths(directory.parent)
        self._set(_empty_state())

    # ------------------------------------------------------------------ loading

    @classmethod
    def for_paths(cls, paths: DataPaths, mmap: bool = True) -> VectorIndex:
        index = cls(paths.index_dir, paths.legacy_embeddings, paths)
        index.reload(mmap=mmap)
        return index

    @classmethod
    def load(cls, directory: Path, legacy_file: Path | None = None, mmap: bool = True) -> VectorIndex:
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
        self._state = state
        self.model_id: str | None = state.model_id
        self.dim: int = state.dim
        self.generation: str = state.generation
        # (n, dim) float32 raw unit vectors, row order of ``ids``; read-only (often memory-mapped).
        self.matrix: np.ndarray = state.vectors
        # Why the last load found no usable index ("" = fine, or simply absent).
        self.problem: str = state.problem
        self._norm_cache: tuple[bytes, np.ndarray] | None = None

    # ------------------------------------------------------------------ reading

    def __len__(self) -> int:
        return len(self._state)

    @property
    def ids(self) -> list[str]:
        """Memory ids in row order."""
        return self._state.id_list()

    def row_of(self, mem_id: str) -> int | None:
        return self._state.row(mem_id)

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
        return not self._state.stale(_wanted([memory]))

    def missing(self, memories: Iterable[HasText]) -> list[str]:
        """Ids of memories whose vector is absent or stale (their text changed)."""
        return self._state.stale(_wanted(memories))

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

    def sync(
        self, memories: Iterable[HasText], encoder: Encoder, progress: Callable[[int], None] | None = None
    ) -> SyncResult:
        """Make the index hold exactly ``memories`` (pass every memory of both groups).

        Only new or changed texts are encoded; ids not passed are dropped; a different model or
        dimension re-encodes everything; the original's embeddings.jsonl is imported once when the
        model is bge-base-zh. Encoding runs outside the index lock; the write re-reads the disk
        under the lock so a concurrent writer's rows are merged, not lost.
        """
        wanted = _wanted(memories)
        result = SyncResult()
        self.reload_if_changed()
        base = self._current_state()
        usable = base.usable_for(encoder)
        if usable and len(base) == len(wanted) and not base.stale(wanted):
            return result  # the common case: nothing to do, no lock, no write
        if self.problem:
            result.rebuilt_reason = "corrupt"
            log(self._paths, "index.corrupt", reason=self.problem)
        elif base.model_id is not None and not usable:
            result.rebuilt_reason = "model"
            log(self._paths, "index.model_changed", old=base.model_id, new=encoder.model_id)
        legacy: dict[str, tuple[np.ndarray, bytes]] = {}
        if base.model_id is None and not self.problem:
            legacy = self._legacy_rows(wanted, encoder, result)
        stale = base.stale(wanted) if usable else list(wanted)
        todo = [(mid, wanted[mid][0], wanted[mid][1]) for mid in stale if mid not in legacy]
        fresh = self._encode(todo, encoder, result, progress)
        return self._commit(
            wanted, [fresh, legacy], [base] if usable else [], encoder, result, backup_stamp=None
        )

    def rebuild(
        self,
        memories: Iterable[HasText],
        encoder: Encoder,
        now: datetime,
        progress: Callable[[int], None] | None = None,
    ) -> SyncResult:
        """Re-encode every memory; the previous files are kept in ``backup-<time>/``.

        ``progress(n)`` is told after each batch how many more memories were handled.
        """
        wanted = _wanted(memories)
        result = SyncResult(rebuilt_reason="requested")
        todo = [(mid, text, h) for mid, (text, h) in wanted.items()]
        fresh = self._encode(todo, encoder, result, progress)
        return self._commit(wanted, [fresh], [], encoder, result, backup_stamp=now.strftime("%Y%m%dT%H%M%S"))

    # ------------------------------------------------------------------ internals

    def _current_state(self) -> _State:
        return self._state

    def _encode(
        self,
        todo: list[tuple[str, str, bytes]],
        encoder: Encoder,
        result: SyncResult,
        progress: Callable[[int], None] | None = None,
    ) -> dict[str, tuple[np.ndarray, bytes]]:
        """Encode in batches; a failing batch is retried text by text so one bad text fails alone.

        Texts of similar length go together (sorted by length): a batch is padded to its longest.
        """
        fresh: dict[str, tuple[np.ndarray, bytes]] = {}
        streak = 0  # consecutive single-text failures: the encoder itself is broken
        todo = sorted(todo, key=lambda item: len(item[1]))
        for start in range(0, len(todo), _BATCH):
            if progress is not None and start:
                progress(_BATCH)  # the previous batch, told here: its body has several exits
            batch = todo[start : start + _BATCH]
            if streak >= _GIVE_UP_AFTER:
                result.failed.extend(mid for mid, _, _ in batch)
                continue
            try:
                vecs = _checked(encoder.encode_passages([t for _, t, _ in batch]), len(batch), encoder.dim)
            except Exception as exc:  # any encoder failure must not cost a memory
                log(self._paths, "index.encode_batch_failed", count=len(batch), error=type(exc).__name__)
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
        if progress is not None and todo:
            progress(len(todo) - (len(todo) - 1) // _BATCH * _BATCH)
        result.encoded = len(fresh)
        return fresh

    def _legacy_rows(
        self, wanted: dict[str, tuple[str, bytes]], encoder: Encoder, result: SyncResult
    ) -> dict[str, tuple[np.ndarray, bytes]]:
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

    def _commit(
        self,
        wanted: dict[str, tuple[str, bytes]],
        loose: list[dict[str, tuple[np.ndarray, bytes]]],
        states: list[_State],
        encoder: Encoder,
        result: SyncResult,
        backup_stamp: str | None,
    ) -> SyncResult:
        """Under the lock: merge what we have with what is on disk now, write if it changed."""
        import numpy as np

        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        with _locked(self.directory):
            disk = _read_state(self.directory, mmap=True)
            sources = ([disk] if backup_stamp is None and disk.usable_for(encoder) else []) + [
                s for s in states if s.generation != disk.generation or not disk.usable_for(encoder)
            ]
            # Keep the on-disk row order and append new ids: a re-sorted store is not a change.
            order = [m for m in disk.id_list() if m in wanted] if sources and sources[0] is disk else []
            seen = set(order)
            order += [m for m in wanted if m not in seen]
            final_ids: list[str] = []
            picks: list[tuple[int, int, int]] = []  # (final row, source number, source row)
            loose_rows: list[np.ndarray] = []
            for mid in order:
                h = wanted[mid][1]
                got = next((d[mid][0] for d in loose if mid in d and d[mid][1] == h), None)
                if got is not None:
                    picks.append((len(final_ids), -1, len(loose_rows)))
                    loose_rows.append(got)
                    final_ids.append(mid)
                    continue
                for k, state in enumerate(sources):
                    row = state.row(mid)
                    if row is not None and state.hash_at(row) == h:
                        picks.append((len(final_ids), k, row))
                        final_ids.append(mid)
                        break
            result.removed = len(set(disk.id_list()) - set(final_ids)) if disk.model_id else 0
            unchanged = (
                backup_stamp is None
                and sources
                and sources[0] is disk
                and not loose_rows
                and final_ids == disk.id_list()
            )
            if unchanged:
                self._set(disk)
                return result
            vectors = np.empty((len(final_ids), encoder.dim), dtype=np.float32)
            hashes = np.empty(len(final_ids), dtype="S32")
            for k in range(-1, len(sources)):
                mine = [(f, r) for f, s, r in picks if s == k]
                if not mine:
                    continue
                dst = np.fromiter((f for f, _ in mine), dtype=np.int64, count=len(mine))
                src = np.fromiter((r for _, r in mine), dtype=np.int64, count=len(mine))
                if k < 0:
                    vectors[dst] = np.stack(loose_rows)[src]
                else:
                    vectors[dst] = np.asarray(sources[k].vectors)[src]
            for f, mid in enumerate(final_ids):
                hashes[f] = wanted[mid][1]
            state = _write_generation(
                self.directory, encoder, final_ids, vectors, hashes, backup_stamp, result
            )
            if result.imported:
                write_atomic(self.directory / LEGACY_MARKER, "imported\n")
            result.written = True
            self._set(state)
            log(
                self._paths,
                "index.written",
                count=len(final_ids),
                encoded=result.encoded,
                removed=result.removed,
                imported=result.imported,
                failed=len(result.failed),
                reason=result.rebuilt_reason or "sync",
            )
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
    rows_by_id: dict[str, int] | None = None
    _hash_list: list[bytes] | None = None
    _id_list: list[str] | None = None

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def id_list(self) -> list[str]:
        if self._id_list is None:
            self._id_list = self.ids.tolist()
        return self._id_list

    def usable_for(self, encoder: Encoder) -> bool:
        return not self.problem and self.model_id == encoder.model_id and self.dim == encoder.dim

    def row(self, mem_id: str) -> int | None:
        if self.rows_by_id is None:
            self.rows_by_id = {m: i for i, m in enumerate(self.id_list())}
        return self.rows_by_id.get(mem_id)

    def hash_at(self, row: int) -> bytes:
        if self._hash_list is None:
            self._hash_list = self.hashes.tolist()
        return self._hash_list[row]

    def stale(self, wanted: dict[str, tuple[str, bytes]]) -> list[str]:
        """Wanted ids with no row or a row for another text."""
        out = []
        for mid, (_text, h) in wanted.items():
            row = self.row(mid)
            if row is None or self.hash_at(row) != h:
                out.append(mid)
        return out


def _empty_state(problem: str = "") -> _State:
    import numpy as np

    return _State(
        None,
        0,
        "",
        np.zeros((0, 0), dtype=np.float32),
        np.zeros(0, dtype="U1"),
        np.zeros(0, dtype="S32"),
        problem,
    )


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
            raise ValueError(header.get("_error", "header") if isinstance(header, dict) else "header")
        if header.get("format") != FORMAT or header.get("version") != VERSION:
            raise ValueError("format/version")
        model, dim, count = header["model"], int(header["dim"]), int(header["count"])
        names = [str(header[k]) for k in ("vectors", "ids", "hashes")]
        if any("/" in n or "\\" in n or n.startswith(".") for n in names):
            raise ValueError("file name")
        vectors = np.load(directory / names[0], mmap_mode="r" if mmap else None, allow_pickle=False)
        ids = np.load(directory / names[1], allow_pickle=False)
        hashes = np.load(directory / names[2], allow_pickle=False)
        if vectors.dtype != np.float32 or vectors.shape != (count, dim):
            raise ValueError(f"vectors {vectors.dtype} {vectors.shape} != ({count}, {dim})")
        if (
            ids.shape != (count,)
            or hashes.shape != (count,)
            or ids.dtype.kind != "U"
            or hashes.dtype != np.dtype("S32")
        ):
            raise ValueError("ids/hashes shape")
        if not isinstance(model, str) or not model or dim <= 0:
            raise ValueError("model/dim")
    except (OSError, ValueError, KeyError, TypeError, EOFError) as exc:
        return _empty_state(problem=str(exc)[:200] or type(exc).__name__)
    # Duplicate ids cannot come from our writer; a hand-edited index is caught cheaply here.
    state = _State(model, dim, str(header.get("generation", "")), vectors, ids, hashes)
    if count and len(state.id_list()) != len(set(state.id_list())):
        return _empty_state(problem="duplicate ids")
    return state


def _write_generation(
    directory: Path,
    encoder: Encoder,
    final_ids: list[str],
    vectors: np.ndarray,
    hashes: np.ndarray,
    backup_stamp: str | None,
    result: SyncResult,
) -> _State:
    """Write the arrays, back up the old generation if asked, then switch the header."""
    import numpy as np

    gen = secrets.token_hex(6)
    ids = np.array(final_ids, dtype=f"U{max([len(m) for m in final_ids] + [1])}")
    names = {"vectors": f"vectors-{gen}.npy", "ids": f"ids-{gen}.npy", "hashes": f"hashes-{gen}.npy"}
    for key, array in (("vectors", vectors), ("ids", ids), ("hashes", hashes)):
        _save_npy(directory / names[key], array)
    # The old files are still live until the header switches, so the backup links them rather
    # than moving them: a reader never finds the index missing.
    if backup_stamp is not None:
        result.backup = _backup(directory, backup_stamp, exclude=gen)
    header = {
        "format": FORMAT,
        "version": VERSION,
        "model": encoder.model_id,
        "dim": encoder.dim,
        "count": len(final_ids),
        "generation": gen,
        **names,
    }
    write_atomic(directory / HEADER, json.dumps(header, ensure_ascii=False, indent=2) + "\n")
    _remove_other_generations(directory, gen)
    return _State(encoder.model_id, encoder.dim, gen, vectors, ids, hashes)


def _save_npy(path: Path, array: Any) -> None:
    """np.save straight into a temp file beside ``path``, fsync, rename (no copy in memory)."""
    import numpy as np

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.tmp.{os.getpid()}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            np.save(fh, array, allow_pickle=False)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _remove_other_generations(directory: Path, keep: str) -> None:
    for path in directory.iterdir():
        if _is_array_file(path) and not path.stem.endswith(f"-{keep}"):
            with contextlib.suppress(OSError):
                path.unlink()


def _is_array_file(path: Path) -> bool:
    return (
        path.is_file()
        and path.suffix == ".npy"
        and path.name.split("-", 1)[0] in {"vectors", "ids", "hashes"}
    )


def _backup(directory: Path, stamp: str, exclude: str) -> Path | None:
    """Hard-link (or copy) the current header and arrays into ``backup-<stamp>/``; keep a few."""
    files = [
        p
        for p in directory.iterdir()
        if p.name == HEADER or (_is_array_file(p) and not p.stem.endswith(f"-{exclude}"))
    ]
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
    backups = sorted(
        (p for p in directory.iterdir() if p.is_dir() and p.name.startswith("backup-")),
        key=lambda p: p.stat().st_mtime_ns,
    )
    for old in backups[:-KEEP_BACKUPS]:
        shutil.rmtree(old, ignore_errors=True)
    return target


@contextlib.contextmanager
def _locked(directory: Path) -> Any:
    from filelock import FileLock, Timeout

    # 0600 like every other file of the data directory.
    lock = FileLock(str(directory / LOCK), timeout=LOCK_TIMEOUT_S, mode=0o600)
    try:
        with lock:
            yield
    except Timeout as exc:
        raise LockTimeout(
            f"向量索引正被另一个进程写入（等待 {LOCK_TIMEOUT_S:.0f} 秒仍未释放）：{directory}"
        ) from exc


# ---------------------------------------------------------------------- helpers


def _wanted(memories: Iterable[HasText]) -> dict[str, tuple[str, bytes]]:
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
