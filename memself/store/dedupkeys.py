"""The exact-duplicate sidecar: which dedup keys a group file holds, without parsing the file.

``MemoryStore.add`` reinforces a twin instead of adding a second copy of a text. Finding a twin by
parsing the whole group file costs as much as the file is long; the sidecar keeps one short hash
per (dedup key, workspace) of the file's memories, tied to the file's stamp (inode, mtime, size),
and a digest of each ``BLOCK`` of the file's bytes as they were at that stamp.

A stamp that no longer matches means another program changed the file (the original plugin or
another client appending, a hand edit, a crash between the file and its sidecar). When the bytes
the sidecar saw are all still there, unchanged, at the start of the file (the file only grew),
only what follows them is parsed (``unchanged_until``); any other change (a line rewritten, the
file cut or compacted) makes the store rebuild the sidecar from a full parse. Either way a stale
sidecar can only cost time, never a missed twin.

Each hash comes with the id of the memory that holds it, so a hit finds its twin's line by id
(``GroupLines.find``, a search of the file's bytes) instead of parsing every line. The sidecar
may hold more pairs than the file (a deleted or rewritten memory's stays until the next full
rebuild): a hit only names candidates, which ``add`` checks against their lines, parsing the
whole file when none of them is a twin. Written only under the memory write lock. Standard
library only.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from memself.atomic import write_atomic
from memself.paths import DataPaths

Stamp = tuple[int, int, int]
_MAGIC = b"memself-dedup-keys 3"
# Bytes per digest: a write that changes a line re-hashes the file from that line's block on.
BLOCK = 64 * 1024
# Known pairs checked by a search each; more are checked against one set of the recorded pairs.
_SEARCHES = 8


@dataclass
class Sidecar:
    hashes: set[bytes]  # the key hashes (``key_hash``) of the file's memories, maybe more
    size: int  # the file's length when the sidecar was written
    digests: list[bytes]  # one per BLOCK of those bytes, the last one of a partial block
    # One line per (hash, id) as stored (``_pair_line``), after a leading newline; split only when
    # a hash is looked up: a large store's add reads the sidecar and rarely needs an id.
    pairs: bytes = b"\n"

    def ids_for(self, wanted: Iterable[bytes]) -> set[str]:
        """The ids recorded with any of the ``wanted`` hashes (candidates, not yet twins)."""
        found: set[str] = set()
        for key in wanted:
            needle = b"\n" + key + b" "
            at = self.pairs.find(needle)
            while at != -1:
                end = self.pairs.index(b"\n", at + 1)
                try:
                    mem_id = json.loads(self.pairs[at + len(needle) : end])
                except ValueError:  # a damaged line names no candidate; the full check still runs
                    mem_id = None
                if isinstance(mem_id, str):
                    found.add(mem_id)
                at = self.pairs.find(needle, end)
        return found

    def add(self, pairs: Iterable[tuple[bytes, str]]) -> None:
        """Record these (hash, id) pairs; a pair already recorded is not written twice (a memory
        rewarded every day would otherwise add its pair every day)."""
        lines = [_pair_line(key, mem_id) for key, mem_id in dict.fromkeys(pairs)]
        # Only a known hash can have its pair already: a new one costs no search. Many known ones
        # (a bulk change) are looked up in one set instead of one search of the pairs each.
        known = [line for line in lines if _key_of(line) in self.hashes]
        if len(known) > _SEARCHES:
            recorded = set(self.pairs.split(b"\n"))
            new = [line for line in lines if line[:-1] not in recorded]
        else:
            new = [line for line in lines if line not in known or b"\n" + line not in self.pairs]
        self.pairs += b"".join(new)
        self.hashes.update(_key_of(line) for line in new)

    def stale_share(self, memories: int) -> float:
        """How many recorded pairs there are per memory of the file, less one: pairs of deleted
        or rewritten memories stay until the sidecar is rebuilt."""
        return max(0.0, self.pairs.count(b"\n") - 1 - memories) / max(memories, 1)


def for_pairs(pairs: Iterable[tuple[bytes, str]], size: int, digests: list[bytes]) -> Sidecar:
    """A sidecar holding exactly these pairs (a full rebuild)."""
    lines = list(dict.fromkeys(_pair_line(key, mem_id) for key, mem_id in pairs))
    return Sidecar({_key_of(line) for line in lines}, size, digests, b"\n" + b"".join(lines))


def _key_of(line: bytes) -> bytes:
    return line[: line.find(b" ")]


def _pair_line(key: bytes, mem_id: str) -> bytes:
    # ASCII JSON: an id a hand edit gave a space, a newline or any other character stays one line.
    return key + b" " + json.dumps(mem_id).encode("ascii") + b"\n"


def sidecar_path(paths: DataPaths, group: str) -> Path:
    return paths.root / f".dedup-keys-{group}"


def key_hash(key: str, workspace: str) -> bytes:
    """16 hex digits naming a dedup key in a scope ("": global)."""
    digest = hashlib.blake2b(f"{workspace}\0{key}".encode("utf-8", "surrogatepass"), digest_size=8)
    return digest.hexdigest().encode("ascii")


def digest_blocks(data: bytes | memoryview) -> list[bytes]:
    """The digest of each BLOCK of ``data`` from its start, the last one of what remains."""
    view = memoryview(data)
    return [
        hashlib.sha256(view[at : at + BLOCK]).hexdigest()[:32].encode() for at in range(0, len(view), BLOCK)
    ]


def load(path: Path, stamp: Stamp | None) -> Sidecar | None:
    """The sidecar, when it exists and was written for exactly ``stamp``; else None."""
    return None if stamp is None else written_for(read(path), stamp)


def written_for(found: tuple[Stamp, Sidecar] | None, stamp: Stamp | None) -> Sidecar | None:
    """The sidecar ``read`` found, when it was written for exactly ``stamp``; else None."""
    return found[1] if found is not None and stamp is not None and found[0] == stamp else None


def unchanged_until(sidecar: Sidecar, data: bytes) -> int | None:
    """Where the lines that may be new start in ``data`` (the group file now), when every byte the
    sidecar saw is still there, unchanged, at its start; None when anything else changed."""
    if len(data) < sidecar.size or digest_blocks(memoryview(data)[: sidecar.size]) != sidecar.digests:
        return None
    # A last line the sidecar saw without its newline may have been completed since: parse it again.
    return data.rfind(b"\n", 0, sidecar.size) + 1


def caught_up(sidecar: Sidecar, data: bytes, pairs: Iterable[tuple[bytes, str]]) -> Sidecar:
    """The sidecar for ``data``, whose first ``sidecar.size`` bytes ``unchanged_until`` checked,
    with ``pairs`` added: only the blocks from the last partial one on are digested again."""
    keep = sidecar.size // BLOCK
    digests = sidecar.digests[:keep] + digest_blocks(memoryview(data)[keep * BLOCK :])
    after = Sidecar(set(sidecar.hashes), len(data), digests, sidecar.pairs)
    after.add(pairs)
    return after


def save_after_write(path: Path, group_file: Path, sidecar: Sidecar, unchanged: int) -> None:
    """Write the sidecar for the group file as it is now. ``sidecar`` described the file before a
    write that left its first ``unchanged`` bytes as they were and already holds the written
    memories' hashes; the file is read back from the first block the write changed."""
    keep = min(unchanged, sidecar.size) // BLOCK
    digests = sidecar.digests[:keep]
    with open(group_file, "rb") as handle:
        info = os.fstat(handle.fileno())
        handle.seek(keep * BLOCK)
        # Block by block: the file is never held whole.
        while block := handle.read(BLOCK):
            digests += digest_blocks(block)
    after = Sidecar(sidecar.hashes, info.st_size, digests, sidecar.pairs)
    write_atomic(path, _render((info.st_ino, info.st_mtime_ns, info.st_size), after))


def _render(stamp: Stamp, sidecar: Sidecar) -> bytes:
    header = _MAGIC + b" " + b" ".join(str(part).encode("ascii") for part in stamp)
    return header + b"\n" + b" ".join(sidecar.digests) + sidecar.pairs


def read(path: Path) -> tuple[Stamp, Sidecar] | None:
    """The stamp the sidecar was written for, and the sidecar, whatever file version that was
    (``load`` wants an exact match; after an outside change ``unchanged_until`` decides)."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    header, _, rest = data.partition(b"\n")
    digests, _, body = rest.partition(b"\n")
    parts = header.split(b" ")
    if b" ".join(parts[:2]) != _MAGIC or len(parts) != 5 or not all(p.isdigit() for p in parts[2:]):
        return None
    ino, mtime, size = (int(p) for p in parts[2:])
    if body and not body.endswith(b"\n"):
        return None  # cut short: rebuilt from the group file
    pairs = b"\n" + body
    sidecar = Sidecar({_key_of(line) for line in body.split(b"\n") if line}, size, digests.split(), pairs)
    if len(sidecar.digests) != -(-size // BLOCK):
        return None
    return (ino, mtime, size), sidecar
