"""The exact-duplicate sidecar: which dedup keys a group file holds, without parsing the file.

``MemoryStore.add`` reinforces a twin instead of adding a second copy of a text. Finding a twin by
parsing the whole group file costs as much as the file is long; the sidecar keeps one short hash
per (dedup key, workspace) of the file's memories, tied to the file's stamp (inode, mtime, size).
A stamp that no longer matches (the original plugin or a hand edit changed the file, a crash came
between the file and its sidecar) makes the sidecar unusable and the store rebuilds it from a full
parse, so a stale sidecar can only cost time, never a missed twin.

The sidecar may hold more hashes than the file (a deleted or rewritten memory's key stays until
the next full rewrite): a hit only sends ``add`` to the full check, which decides. Written only
under the memory write lock. Standard library only.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

from memself.atomic import write_atomic
from memself.paths import DataPaths

Stamp = tuple[int, int, int]
_MAGIC = b"memself-dedup-keys 1"


def sidecar_path(paths: DataPaths, group: str) -> Path:
    return paths.root / f".dedup-keys-{group}"


def key_hash(key: str, workspace: str) -> bytes:
    """16 hex digits naming a dedup key in a scope ("": global)."""
    digest = hashlib.blake2b(f"{workspace}\0{key}".encode("utf-8", "surrogatepass"), digest_size=8)
    return digest.hexdigest().encode("ascii")


def load(path: Path, stamp: Stamp | None) -> set[bytes] | None:
    """The hashes, when the sidecar exists and was written for exactly ``stamp``; else None."""
    if stamp is None:
        return None
    try:
        data = path.read_bytes()
    except OSError:
        return None
    header, _, body = data.partition(b"\n")
    if header != _header(stamp):
        return None
    return set(body.split(b"\n")) - {b""}


def save(path: Path, stamp: Stamp | None, hashes: Iterable[bytes]) -> None:
    if stamp is None:
        return
    write_atomic(path, _header(stamp) + b"\n" + b"".join(h + b"\n" for h in hashes))


def _header(stamp: Stamp) -> bytes:
    return _MAGIC + b" " + b" ".join(str(part).encode("ascii") for part in stamp)
