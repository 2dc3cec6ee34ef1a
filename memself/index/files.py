"""The vector index on disk: a header naming one generation of three array files.

Files in ``<data dir>/index/``:

- ``header.json``: ``{"format", "version", "model", "dim", "count", "generation", "vectors",
  "ids", "hashes"}``, written last; it names the generation's three array files.
- ``vectors-<gen>.npy``: float32 ``(count, dim)``, raw (not centred) unit vectors of the memories.
- ``ids-<gen>.npy``: the memory ids, row order. ``hashes-<gen>.npy``: ``text_hash`` of each
  memory's text, so unchanged text is never re-encoded.
- ``backup-<time>/``: the header and arrays a rebuild replaced (the last few are kept).

Why generations: the header is replaced atomically after the arrays it names are on disk, so a
reader sees the old index or the new one, never a mix. Old generation files are removed after the
switch (a reader that memory-mapped them keeps its inode on POSIX). A corrupt or mismatched index
reads as empty with a ``problem``; the caller rebuilds it from the store.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import shutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memself.atomic import save_npy, write_atomic
from memself.errors import LockTimeout

if TYPE_CHECKING:
    import numpy as np

FORMAT = "memself-vector-index"
VERSION = 1
HEADER = "header.json"
LOCK = ".lock"
KEEP_BACKUPS = 3
LOCK_TIMEOUT_S = 60.0
_ARRAYS = ("vectors", "ids", "hashes")


def text_hash(text: str) -> bytes:
    """The stored content hash: the first 32 hex digits of sha256, as ASCII bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32].encode("ascii")


@dataclass
class IndexState:
    """One generation as read (or just written): arrays plus lazily built lookups."""

    model_id: str | None
    dim: int
    generation: str
    vectors: Any
    ids: Any
    hashes: Any
    problem: str = ""  # why no usable index was found ("" = fine, or simply absent)
    rows_by_id: dict[str, int] | None = None
    _hash_list: list[bytes] | None = None
    _id_list: list[str] | None = None

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def id_list(self) -> list[str]:
        if self._id_list is None:
            self._id_list = self.ids.tolist()
        return self._id_list

    def matches(self, model_id: str, dim: int) -> bool:
        """Readable and made by this model: its rows can be kept."""
        return not self.problem and self.model_id == model_id and self.dim == dim

    def row(self, mem_id: str) -> int | None:
        if self.rows_by_id is None:
            self.rows_by_id = {m: i for i, m in enumerate(self.id_list())}
        return self.rows_by_id.get(mem_id)

    def hash_at(self, row: int) -> bytes:
        if self._hash_list is None:
            self._hash_list = self.hashes.tolist()
        return self._hash_list[row]

    def stale(self, wanted: Mapping[str, tuple[str, bytes]]) -> list[str]:
        """Ids of ``wanted`` (id -> (text, hash)) with no row or a row for another text."""
        out = []
        for mid, (_text, h) in wanted.items():
            row = self.row(mid)
            if row is None or self.hash_at(row) != h:
                out.append(mid)
        return out


def empty_state(problem: str = "") -> IndexState:
    import numpy as np

    return IndexState(
        None,
        0,
        "",
        np.zeros((0, 0), dtype=np.float32),
        np.zeros(0, dtype="U1"),
        np.zeros(0, dtype="S32"),
        problem,
    )


def read_header(directory: Path) -> object:
    """The parsed header; None when there is none; ``{"_error": ...}`` when it is unreadable."""
    try:
        return json.loads((directory / HEADER).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        return {"_error": f"header: {type(exc).__name__}"}


def header_generation(directory: Path) -> str:
    header = read_header(directory)
    return header.get("generation", "") if isinstance(header, dict) else ""


def read_state(directory: Path, mmap: bool) -> IndexState:
    """The generation the header names, checked; a missing or bad one reads as empty."""
    import numpy as np

    header = read_header(directory)
    if header is None:
        return empty_state()
    try:
        if not isinstance(header, dict) or "_error" in header:
            raise ValueError(header.get("_error", "header") if isinstance(header, dict) else "header")
        if header.get("format") != FORMAT or header.get("version") != VERSION:
            raise ValueError("format/version")
        model, dim, count = header["model"], int(header["dim"]), int(header["count"])
        names = [str(header[k]) for k in _ARRAYS]
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
        return empty_state(problem=str(exc)[:200] or type(exc).__name__)
    # Duplicate ids cannot come from our writer; a hand-edited index is caught cheaply here.
    state = IndexState(model, dim, str(header.get("generation", "")), vectors, ids, hashes)
    if count and len(state.id_list()) != len(set(state.id_list())):
        return empty_state(problem="duplicate ids")
    return state


def write_generation(
    directory: Path,
    model_id: str,
    dim: int,
    final_ids: list[str],
    vectors: np.ndarray,
    hashes: np.ndarray,
    backup_stamp: str | None,
) -> tuple[IndexState, Path | None]:
    """Write the arrays, back up the old generation if asked (``backup-<stamp>``), then switch
    the header and remove the other generations. Returns the new state and the backup folder.
    The caller holds ``locked(directory)``."""
    import numpy as np

    gen = secrets.token_hex(6)
    ids = np.array(final_ids, dtype=f"U{max([len(m) for m in final_ids] + [1])}")
    names = {key: f"{key}-{gen}.npy" for key in _ARRAYS}
    for key, array in (("vectors", vectors), ("ids", ids), ("hashes", hashes)):
        save_npy(directory / names[key], array)
    # The old files are still live until the header switches, so the backup links them rather
    # than moving them: a reader never finds the index missing.
    backup = _backup(directory, backup_stamp, exclude=gen) if backup_stamp is not None else None
    header = {
        "format": FORMAT,
        "version": VERSION,
        "model": model_id,
        "dim": dim,
        "count": len(final_ids),
        "generation": gen,
        **names,
    }
    write_atomic(directory / HEADER, json.dumps(header, ensure_ascii=False, indent=2) + "\n")
    _remove_other_generations(directory, gen)
    return IndexState(model_id, dim, gen, vectors, ids, hashes), backup


def _remove_other_generations(directory: Path, keep: str) -> None:
    for path in directory.iterdir():
        if _is_array_file(path) and not path.stem.endswith(f"-{keep}"):
            with contextlib.suppress(OSError):
                path.unlink()


def _is_array_file(path: Path) -> bool:
    return path.is_file() and path.suffix == ".npy" and path.name.split("-", 1)[0] in _ARRAYS


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
def locked(directory: Path) -> Iterator[None]:
    """The index's own write lock (a file lock beside the header), for one merge and write."""
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
