"""Writes that replace several files as one step, and the cleanup of what killed writers leave.

A move between files (delete and merge: group file -> trash; restore: trash -> group file) must
never be seen half done after a crash: half done loses the memory (gone from one file, not yet in
the other) or duplicates it. So a multi-file write is two-phase:

1. every new content is staged in a temp file beside its target and fsynced;
2. an intent record naming the staged files and their targets is written atomically: this is the
   commit point;
3. each staged file is renamed over its target;
4. the intent is removed.

A writer killed before 2 leaves only orphaned temp files (the old files are whole and
consistent); killed after 2, the next writer (under the lock), or the next reader that can take
the lock, replays the intent by renaming the staged files that still exist. A rename done twice
is impossible (the staged file is gone after the first), so replaying is idempotent.

Only writers holding the memory write lock call ``commit`` and ``replay``. Standard library only.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from memself.atomic import TMP_MARK, fsync_dir, real_target, stage, write_atomic
from memself.logs import log
from memself.paths import DataPaths
from memself.platform import files as platform_files
from memself.store.lock import OWNER_PREFIX, STAGING_PREFIX, owner_pid, pid_alive

INTENT_NAME = ".memory-write.intent"
# No legitimate write takes this long: a leftover older than this is a leftover whatever its pid.
LEFTOVER_AGE_S = 3600.0
Stamp = tuple[int, int, int]
# memself's own temp files (.<name>.tmp.<pid>.<random>), the original's (<name>.tmp.<pid>), and
# pid-less ones (.<name>.tmp.<random>) that only their age can clear.
_OUR_TMP = re.compile(r"^\.(?P<base>.+)\.tmp\.(?P<pid>\d+)\.[^.]+$")
_ORIGINAL_TMP = re.compile(r"^(?P<base>[^.].*)\.tmp\.(?P<pid>\d+)$")
_ANON_TMP = re.compile(r"^\..+\.tmp\.[^.]+$")
# memself's staging folders carry their pid (.memory-write-<pid>-<random>); the original's do not.
_OUR_STAGING = re.compile(r"^\.memory-write-(?P<pid>\d+)-")


def intent_path(paths: DataPaths) -> Path:
    return paths.root / INTENT_NAME


def file_stamp(path: Path) -> Stamp | None:
    """(inode, mtime ns, size) of the file ``path`` leads to; None when it does not exist.

    Every writer replaces a file with a new inode or, appending in place like the original
    plugin, changes its size and mtime: any write gives a new stamp.
    """
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    return info.st_ino, info.st_mtime_ns, info.st_size


def commit(
    paths: DataPaths,
    writes: list[tuple[Path, bytes | list[bytes | memoryview]]],
    precheck: Callable[[], None] = lambda: None,
) -> None:
    """Replace every ``path`` with its bytes as one step (see the module doc).

    ``precheck`` runs after staging, just before the commit point; if it raises, nothing is
    written and the staged files are removed.
    """
    staged: list[tuple[Path, Path]] = []
    try:
        for path, data in writes:
            staged.append(stage(path, data))
        precheck()
        if len(staged) == 1:
            platform_files.replace(*staged[0])
            fsync_dir(staged[0][1].parent)
            return
        bases = [file_stamp(target) for _, target in staged]
        record = {
            "version": 1,
            "moves": [
                {"staged": str(src), "target": str(target), "base": list(base) if base else None}
                for (src, target), base in zip(staged, bases, strict=True)
            ],
        }
        write_atomic(intent_path(paths), json.dumps(record, ensure_ascii=False) + "\n")
    except BaseException:
        for src, _ in staged:
            with contextlib.suppress(OSError):
                os.unlink(src)
        raise
    _apply(paths, [(src, target) for src, target in staged])


def _apply(paths: DataPaths, moves: Iterable[tuple[Path, Path]]) -> None:
    folders = set()
    for src, target in moves:
        with contextlib.suppress(FileNotFoundError):  # already renamed by an earlier replay
            platform_files.replace(src, target)
        folders.add(target.parent)
    for folder in folders:
        fsync_dir(folder)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(intent_path(paths))
    fsync_dir(paths.root)


def known_targets(paths: DataPaths) -> set[Path]:
    """The only files an intent may name: the group files and the trash (through their links)."""
    out = set()
    for path in (paths.group_file("rule"), paths.group_file("project"), paths.trash):
        with contextlib.suppress(OSError, ValueError):
            out.add(real_target(path))
    return out


def replay(paths: DataPaths) -> bool:
    """Finish a multi-file write that a killed writer committed; True if there was one.

    A staged file whose target changed since the commit point (another program, such as the
    original plugin, rewrote it meanwhile) is not renamed over that change: it is left for the
    cleanup and logged, so the worst case is a memory in two files, never one in none.
    """
    path = intent_path(paths)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return False
    try:
        record = json.loads(raw)
        moves = [(Path(m["staged"]), Path(m["target"]), m.get("base")) for m in record["moves"]]
    except (ValueError, KeyError, TypeError) as exc:
        aside = path.with_name(f"{INTENT_NAME}.bad-{time.time_ns()}")
        with contextlib.suppress(OSError):
            platform_files.replace(path, aside)
        log(paths, "intent-unreadable", error=type(exc).__name__, moved_to=aside.name)
        return False
    allowed = known_targets(paths)
    todo = []
    for src, target, base in moves:
        valid = (
            target in allowed
            and src.parent == target.parent
            and src.name.startswith(f".{target.name}{TMP_MARK}")
        )
        if not valid:
            log(paths, "intent-move-refused", staged=str(src), target=str(target))
            continue
        if not src.exists():
            continue
        current = file_stamp(target)
        if (list(current) if current else None) != base:
            log(paths, "intent-move-skipped", target=str(target), reason="changed since commit")
            continue
        todo.append((src, target))
    log(paths, "intent-replayed", moves=len(todo))
    _apply(paths, todo)
    return True


# ---------------------------------------------------------------- leftovers of killed writers


def cleanup_leftovers(paths: DataPaths, deep: bool = False) -> int:
    """Remove staging folders and temp files whose writer is dead, or that are old.

    Called under the write lock after ``replay`` (so no staged file an intent names is still
    needed). A temp file of a live process is kept unless it is old: config, judge jobs and the
    index are written without this lock. ``deep`` also sweeps the index and judge-job folders
    (the daily maintenance). Returns how many entries were removed.

    Ages are measured on the file system's clock, like the lock's lease: they compare mtimes
    the kernel wrote, which a caller's ``now`` (moved freely by tests) cannot.
    """
    wall = time.time()
    removed = _sweep_root(paths.root, wall)
    extra: set[Path] = set()
    for path in (paths.group_file("rule"), paths.group_file("project"), paths.trash, paths.config):
        with contextlib.suppress(OSError, ValueError):
            target = real_target(path)
            if target.parent != paths.root:
                extra.add(target)
    for target in extra:
        # In a user's own folder only the exact names we stage for that file are ours.
        removed += _sweep_files(target.parent, wall, only_base=target.name)
    if deep:
        for folder in (paths.index_dir, paths.side_dir):
            removed += _sweep_files(folder, wall)
        removed += _sweep_index_generations(paths.index_dir, wall)
    if removed:
        log(paths, "leftovers-removed", count=removed)
    return removed


def _old(path: Path, wall: float) -> bool:
    try:
        return wall - os.lstat(path).st_mtime > LEFTOVER_AGE_S
    except OSError:
        return False


def _sweep_root(root: Path, wall: float) -> int:
    removed = _sweep_files(root, wall)
    try:
        names = os.listdir(root)
    except OSError:
        return removed
    for name in names:
        if not name.startswith(STAGING_PREFIX):
            continue
        folder = root / name
        if not folder.is_dir() or folder.is_symlink():
            continue
        try:
            owners = [n for n in os.listdir(folder) if n.startswith(OWNER_PREFIX)]
        except OSError:
            continue
        # An empty one of the original's may be a waiter's about to get its owner file: only its
        # age clears it. Ours name their pid.
        ours = _OUR_STAGING.match(name)
        pids = [owner_pid(n) for n in owners] + ([int(ours["pid"])] if ours else [])
        dead = bool(pids) and not any(pid_alive(pid) for pid in pids)
        if dead or _old(folder, wall):
            import shutil

            shutil.rmtree(folder, ignore_errors=True)
            removed += 1
    return removed


# The vector index's array files (``memself.index.files``): a generation whose writer was killed
# before it switched the header is never named by it and, unless a later index write happens,
# would stay on disk (hundreds of MB for a large store).
_INDEX_ARRAY = re.compile(r"^(vectors|ids|hashes)-[0-9a-f]+\.npy$")


def _sweep_index_generations(index_dir: Path, wall: float) -> int:
    try:
        header = json.loads((index_dir / "header.json").read_text(encoding="utf-8"))
        live = {str(header[k]) for k in ("vectors", "ids", "hashes")}
        names = os.listdir(index_dir)
    except (OSError, ValueError, KeyError, TypeError):
        return 0  # without a readable header we cannot tell the live generation: touch nothing
    removed = 0
    for name in names:
        # Young ones may be a running writer's next generation (it holds the index's own lock).
        if _INDEX_ARRAY.match(name) and name not in live and _old(index_dir / name, wall):
            with contextlib.suppress(OSError):
                os.unlink(index_dir / name)
                removed += 1
    return removed


def _sweep_files(folder: Path, wall: float, only_base: str | None = None) -> int:
    try:
        names = os.listdir(folder)
    except OSError:
        return 0
    removed = 0
    for name in names:
        if TMP_MARK not in name:
            continue
        match = _OUR_TMP.match(name) or _ORIGINAL_TMP.match(name)
        if only_base is not None and (match is None or match["base"] != only_base):
            continue
        if match is None and not _ANON_TMP.match(name):
            continue
        path = folder / name
        if path.is_dir() and not path.is_symlink():
            continue
        dead = match is not None and not pid_alive(int(match["pid"]))
        if dead or _old(path, wall):
            try:
                os.unlink(path)
                removed += 1
            except OSError:
                pass
    return removed
