"""``VectorIndex``: the loaded index of one data directory, and how it follows the store.

``sync`` makes the index hold exactly the memories it is given: only new or changed texts are
encoded (a different model or dimension re-encodes everything); ids not given are dropped; the
original's vectors are imported once (``memself.index.legacy``). ``rebuild`` re-encodes every
memory and keeps the previous files as a backup. Encoding runs outside the index lock; the write
re-reads the disk under the lock so a concurrent writer's rows are merged, not lost. A text that
fails to encode stays out of the index and is retried on the next sync.

Vectors are raw (not centred) so a new recall space needs no re-encoding; recall projects them
(``memself.recall.scoring``). The file format is ``memself.index.files``.

A memory's appliesWhen requests get rows of their own (``view_row_id``: the memory id, a unit
separator and the request's position), when the encoder says recall scores them (its ``views``
attribute, set by ``memself.recall.memory_side`` from the model's calibration). They follow the
memory like its text does: a changed request is re-encoded, a removed one or a removed memory's
are dropped, all in the same atomic generation switch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from memself.index.files import (
    IndexState,
    empty_state,
    header_generation,
    locked,
    read_state,
    text_hash,
    write_generation,
)
from memself.index.legacy import legacy_vectors, mark_imported
from memself.logs import log
from memself.paths import DataPaths
from memself.timeutil import iso, parse_iso

if TYPE_CHECKING:
    import numpy as np

    from memself.model.encoder import Encoder

_BATCH = 64
_GIVE_UP_AFTER = 3
# Between a memory id and a view's position in that view's row id: a control character that no
# memory id carries (ids are base36, or whatever the original wrote: printable text).
VIEW_SEPARATOR = "\x1f"


def view_row_id(mem_id: str, position: int) -> str:
    """The index row id of a memory's ``position``-th appliesWhen request."""
    return f"{mem_id}{VIEW_SEPARATOR}{position}"


def wants_views(encoder: object) -> bool:
    """Whether this (memory-side) encoder's recall scores appliesWhen views, so they need rows."""
    return bool(getattr(encoder, "views", False))


class HasText(Protocol):
    """What the index needs of a memory (``memself.store.records.Memory`` fits); its ``appliesWhen``, when
    it has one, is read with ``getattr``."""

    @property
    def id(self) -> str: ...

    @property
    def text(self) -> str: ...


Vectors = dict[str, tuple["np.ndarray", bytes]]  # row id -> (vector, hash of the text it encodes)


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


@dataclass
class SyncPlan:
    """What ``VectorIndex.plan`` found: the rows wanted (id -> (text, hash)), the ones to encode
    (id, text, hash; newest text first, see ``newest_first``), the original's vectors to import
    and the loaded generation whose rows are kept (none when another model made it)."""

    wanted: dict[str, tuple[str, bytes]]
    todo: list[tuple[str, str, bytes]]
    legacy: Vectors
    states: list[IndexState]
    result: SyncResult
    current: bool = False  # the index already holds exactly ``wanted``
    # Something changes without encoding (rows dropped, the original's vectors, another model's
    # or a corrupt index replaced): ``commit`` writes even with no fresh vectors.
    known_changes: bool = True


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
        self._set(empty_state())

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
        self._set(read_state(self.directory, mmap))

    def reload_if_changed(self, mmap: bool = True) -> bool:
        """Reload when another process wrote a new generation; True if it did."""
        if header_generation(self.directory) == self.generation:
            return False
        self.reload(mmap=mmap)
        return True

    def _set(self, state: IndexState) -> None:
        self._state = state
        self.model_id: str | None = state.model_id
        self.dim: int = state.dim
        self.generation: str = state.generation
        # (n, dim) float32 raw unit vectors, row order of ``ids``; read-only (often memory-mapped).
        self.matrix: np.ndarray = state.vectors
        # Why the last load found no usable index ("" = fine, or simply absent).
        self.problem: str = state.problem

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

    def missing(self, memories: Iterable[HasText], views: bool = False) -> list[str]:
        """Row ids (memory ids, and view row ids with ``views``) whose vector is absent or stale
        (their text changed)."""
        return self._state.stale(_wanted(memories, views))

    # ------------------------------------------------------------------ writing

    def sync(
        self, memories: Iterable[HasText], encoder: Encoder, progress: Callable[[int], None] | None = None
    ) -> SyncResult:
        """Make the index hold exactly ``memories`` (pass every memory of both groups); see the
        module doc. Writes nothing when the index already matches."""
        plan = self.plan(memories, encoder)
        if plan.current:
            return plan.result  # the common case: nothing to do, no lock, no write
        fresh = self._encode(plan.todo, encoder, plan.result, progress)
        return self._commit(
            plan.wanted, [fresh, plan.legacy], plan.states, encoder, plan.result, backup_stamp=None
        )

    def plan(self, memories: Iterable[HasText], encoder: Encoder) -> SyncPlan:
        """What a sync to ``memories`` has to encode, without encoding or writing anything."""
        memories = list(memories)
        wanted = _wanted(memories, wants_views(encoder))
        result = SyncResult()
        self.reload_if_changed()
        base = self._state
        usable = base.matches(encoder.model_id, encoder.dim)
        if usable and len(base) == len(wanted) and not base.stale(wanted):
            return SyncPlan(wanted, [], {}, [base], result, current=True)
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
        todo = newest_first(
            [(mid, wanted[mid][0], wanted[mid][1]) for mid in stale if mid not in legacy], memories
        )
        dropped = not usable or any(mid not in wanted for mid in base.id_list())
        return SyncPlan(
            wanted, todo, legacy, [base] if usable else [], result, known_changes=dropped or bool(legacy)
        )

    def commit(self, plan: SyncPlan, encoder: Encoder, fresh: Vectors | None = None) -> SyncResult:
        """Write what ``plan`` needs no (more) encoding for: removed rows dropped, the original's
        vectors imported, another model's rows cleared, and ``fresh`` vectors of some of its
        ``todo`` added; the rest of ``todo`` is left for ``add_encoded``."""
        if plan.current or (not fresh and not plan.known_changes):
            return plan.result  # only rows still to encode: nothing to write yet
        plan.result.encoded = len(fresh or {})
        loose = [fresh or {}, plan.legacy]
        return self._commit(plan.wanted, loose, plan.states, encoder, plan.result, backup_stamp=None)

    def encode(self, todo: list[tuple[str, str, bytes]], encoder: Encoder, result: SyncResult) -> Vectors:
        """Vectors of ``todo`` items (id, text, hash), batched; failures land in ``result.failed``."""
        return self._encode(todo, encoder, result)

    def add_encoded(
        self, wanted: dict[str, tuple[str, bytes]], fresh: Vectors, encoder: Encoder
    ) -> SyncResult:
        """Merge ``fresh`` vectors into the index on disk, keeping only rows of ``wanted`` (the
        memories now); each call is one crash-safe generation switch."""
        result = SyncResult(encoded=len(fresh))
        return self._commit(wanted, [fresh], [], encoder, result, backup_stamp=None)

    def adopt(self, other: VectorIndex) -> None:
        """Take the generation another ``VectorIndex`` of this directory loaded or wrote."""
        self._set(other._state)

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
        wanted = _wanted(memories, wants_views(encoder))
        result = SyncResult(rebuilt_reason="requested")
        todo = [(mid, text, h) for mid, (text, h) in wanted.items()]
        fresh = self._encode(todo, encoder, result, progress)
        return self._commit(wanted, [fresh], [], encoder, result, backup_stamp=now.strftime("%Y%m%dT%H%M%S"))

    # ------------------------------------------------------------------ internals

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
        fresh: Vectors = {}
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
        """The original's vectors for memories still present (see ``memself.index.legacy``)."""
        rows = legacy_vectors(self.directory, self.legacy_file, encoder.model_id, encoder.dim)
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
        states: list[IndexState],
        encoder: Encoder,
        result: SyncResult,
        backup_stamp: str | None,
    ) -> SyncResult:
        """Under the lock: merge what we have with what is on disk now, write if it changed."""
        import numpy as np

        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        with locked(self.directory):
            disk = read_state(self.directory, mmap=True)
            fits = disk.matches(encoder.model_id, encoder.dim)
            sources = ([disk] if backup_stamp is None and fits else []) + [
                s for s in states if s.generation != disk.generation or not fits
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
            state, backup = write_generation(
                self.directory, encoder.model_id, encoder.dim, final_ids, vectors, hashes, backup_stamp
            )
            result.backup = backup
            if result.imported:
                mark_imported(self.directory)
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


Todo = list[tuple[str, str, bytes]]  # (row id, text, text hash) to encode


def newest_first(todo: Todo, memories: Sequence[HasText]) -> Todo:
    """``todo`` rows, the newest text first: what the user wrote last is what they are most likely
    to ask about next, so a long backlog serves it first. A memory's text is as new as its
    ``textChangedAt`` (an edit) or else its ``createdAt``; a view row is as new as its memory.
    Rows of the same time, or without one, keep the store's order reversed (new memories are
    appended)."""
    if not todo:
        return todo
    owners = {mid.split(VIEW_SEPARATOR, 1)[0] for mid, _, _ in todo}
    rank: dict[str, tuple[str, int]] = {}
    for position, memory in enumerate(memories):
        if memory.id in owners:
            written = max(_utc_text(memory, "textChangedAt"), _utc_text(memory, "createdAt"))
            rank[memory.id] = (written, position)
    unknown = ("", -1)
    return sorted(todo, key=lambda item: rank.get(item[0].split(VIEW_SEPARATOR, 1)[0], unknown), reverse=True)


def _utc_text(memory: HasText, name: str) -> str:
    """The memory's time ``name`` as ``timeutil.iso`` writes it (such strings sort as their times
    do), "" when it has none. What memself and the original write is already in that form: parsing
    a whole store's times would cost a large backlog's plan far more than its sort."""
    text = getattr(memory, name, "")
    if not isinstance(text, str) or not text:
        return ""
    if len(text) == 24 and text[10] == "T" and text[19] == "." and text[23] == "Z":
        return text  # iso's shape; a malformed one only moves a row in the encoding order
    parsed = parse_iso(text)
    return iso(parsed) if parsed is not None else ""


def _wanted(memories: Iterable[HasText], views: bool = False) -> dict[str, tuple[str, bytes]]:
    """row id -> (text, hash), in the order given; a repeated id keeps its last text. With
    ``views``, each memory's appliesWhen requests follow it as rows of their own."""
    out: dict[str, tuple[str, bytes]] = {}
    for m in memories:
        if m.id and isinstance(m.text, str):
            out[m.id] = (m.text, text_hash(m.text))
            if views:
                for k, request in enumerate(getattr(m, "appliesWhen", ()) or ()):
                    if isinstance(request, str) and request:
                        out[view_row_id(m.id, k)] = (request, text_hash(request))
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
