"""The memory store: two group files, the trash, and every write under one lock, atomically.

Reads are lenient, line by line: a line that is not valid UTF-8, not JSON, not a usable record
(no id or text, a confidence that is not a finite number or that rounding cannot take) or
absurdly long (beyond ``MAX_LINE_BYTES``, which is never parsed) is quarantined. The rest of the
file loads as usual; quarantined lines are kept byte for byte on every rewrite, so nothing a
user had is lost, and ``list`` and ``doctor`` name each one.

Writes: under the write lock, a write first finishes a multi-file write that a killed writer had
committed (``journal.replay``) and clears crash leftovers, then reads only the files it changes,
noting each one's stamp. A write costs what it changes, not what the store holds: a new memory is
one line appended to its group file (``atomic.append_lines``; the original appends the same way),
its exact-duplicate check reads a sidecar of key hashes instead of the file
(``memself.store.dedupkeys``); a change, removal or restore edits only its lines
(``memself.store.grouplines``), and a group file the write does not change is not read at all. Lines
therefore drift out of the original's order (both readers accept any order) until the daily
maintenance writes them back sorted. Before its commit point a write checks that it still holds
the lock and that no file changed since it read it; otherwise it fails loudly and writes nothing
(see ``memself.store.lock``). Files that change together (a move between a group file and the trash)
are replaced as one step (``memself.store.journal``). A write does not regenerate ``memories.html``:
whoever shows the page regenerates it (``memself.page.listing.refresh_views``), and the engine does
a little after writes.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path

from memself.atomic import append_lines
from memself.errors import InvalidInput, LockLost, MemselfError, NotFound, WriteFailed
from memself.logs import log
from memself.paths import DataPaths
from memself.store import confidence, dedupkeys, journal, torntail
from memself.store.grouplines import Chunk, GroupLines, render_record
from memself.store.lock import DEFAULT_WAIT_S, REWARD_WAIT_S, LockHandle, write_lock
from memself.store.recordlines import MAX_LINE_BYTES, encode_record
from memself.store.records import (
    GROUPS,
    Memory,
    check_applies_when,
    check_group,
    check_text,
    dedup_key,
    record_problem,
    round_conf,
    sort_memories,
)
from memself.store.workspaces import Workspace
from memself.timeutil import iso, local_day, parse_iso

TRASH_KEEP_DAYS = 30
# How long a reader that finds a killed writer's committed intent waits for the lock to replay it.
_READ_REPLAY_WAIT_S = 0.3


@dataclass
class BadLine:
    line_no: int
    raw: bytes  # the line as found, without its newline; written back unchanged
    reason: str


@dataclass
class GroupFile:
    group: str
    memories: list[Memory] = field(default_factory=list)
    bad_lines: list[BadLine] = field(default_factory=list)
    stamp: journal.Stamp | None = None


@dataclass
class TrashEntry:
    memory: Memory
    deleted_at: str
    reason: str

    def to_json(self) -> dict[str, object]:
        return {**self.memory.to_json(), "deletedAt": self.deleted_at, "deleteReason": self.reason}


@dataclass
class TrashFile:
    entries: list[TrashEntry] = field(default_factory=list)
    bad_lines: list[BadLine] = field(default_factory=list)
    stamp: journal.Stamp | None = None


# What ``MemoryStore.replace_contents`` asks of its caller: (memories per group, trash) -> the
# new contents, or None for no change.
ContentsChange = Callable[
    [dict[str, list[Memory]], list[TrashEntry]], "tuple[dict[str, list[Memory]], list[TrashEntry]] | None"
]


@dataclass
class Change:
    memory: Memory
    gain: float
    previous_text: str


@dataclass
class Added:
    """What ``MemoryStore.add`` did: a new memory, or the reinforce of an existing twin."""

    memory: Memory
    duplicate: bool = False  # the group already held this text: reinforced, nothing added
    gain: float = 0.0  # the reinforce's gain (0 once the day's cap is reached)
    revived: bool = False  # the twin was deprecated and the gain brought it back
    trashed_twin: TrashEntry | None = None  # a new memory whose twin sits in the trash


def parse_records(data: bytes) -> tuple[list[dict[str, object]], list[BadLine]]:
    """The usable records of a JSON Lines file, and its quarantined lines with their reasons.

    Lines are split on newline bytes only: a record may hold U+2028 and friends raw (``ensure_ascii``
    is off), which ``str.splitlines`` would wrongly cut.
    """
    lines = data.split(b"\n")
    whole = _parse_whole(lines)
    if whole is not None:
        return whole, []
    records: list[dict[str, object]] = []
    bad: list[BadLine] = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        if len(raw) > MAX_LINE_BYTES:
            bad.append(
                BadLine(
                    number, raw, f"这一行过长（{len(raw)} 字节，上限 {MAX_LINE_BYTES // 1024} KiB），未解析"
                )
            )
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            bad.append(BadLine(number, raw, "不是合法的 UTF-8"))
            continue
        try:
            value = json.loads(text)
        except RecursionError:
            bad.append(BadLine(number, raw, "JSON 嵌套过深"))
            continue
        except ValueError:
            bad.append(BadLine(number, raw, "不是合法的 JSON"))
            continue
        problem = record_problem(value)
        if problem:
            bad.append(BadLine(number, raw, problem))
            continue
        records.append(value)
    return records, bad


def _parse_whole(lines: list[bytes]) -> list[dict[str, object]] | None:
    """Every line parsed in one ``json.loads`` (a large file parses several times faster than
    line by line), or None when any line needs the line-by-line path: too long, not one object
    on its own line, not JSON, or not a usable record. Each line must start with ``{`` and end
    with ``}`` and the array must hold exactly one usable record per line."""
    kept = [line for line in lines if line.strip()]
    for line in kept:
        if len(line) > MAX_LINE_BYTES or not (
            line.lstrip().startswith(b"{") and line.rstrip().endswith(b"}")
        ):
            return None
    try:
        values = json.loads(b"[" + b",".join(kept) + b"]")
    except (ValueError, RecursionError):
        return None
    if not isinstance(values, list) or len(values) != len(kept) or any(record_problem(v) for v in values):
        return None
    return values


def parse_lines(data: bytes | str, group: str) -> GroupFile:
    result = GroupFile(group)
    records, result.bad_lines = parse_records(data.encode("utf-8") if isinstance(data, str) else data)
    for raw in records:
        memory = Memory.from_json(raw, group)
        if memory is None:  # record_problem already refuses what from_json cannot use
            continue
        result.memories.append(memory)
    return result


def parse_trash(data: bytes) -> TrashFile:
    result = TrashFile()
    records, result.bad_lines = parse_records(data)
    for raw in records:
        category = raw.get("category", "")
        memory = Memory.from_json(raw, category if isinstance(category, str) else "")
        if memory is None:
            continue
        deleted_at = memory.extra.pop("deletedAt", "")
        reason = memory.extra.pop("deleteReason", "")
        result.entries.append(TrashEntry(memory, str(deleted_at), str(reason)))
    return result


def render_lines(records: Iterable[dict[str, object]], bad_lines: Iterable[BadLine] = ()) -> bytes:
    """Records as stored lines (``recordlines.encode_record``), then quarantined lines as found."""
    return b"".join([*(encode_record(r) for r in records), *(b.raw + b"\n" for b in bad_lines)])


def read_file(path: Path) -> tuple[bytes, journal.Stamp | None]:
    """The bytes of ``path`` and the stamp of exactly the version read (None: no such file)."""
    try:
        with open(path, "rb") as handle:
            info = os.fstat(handle.fileno())
            return handle.read(), (info.st_ino, info.st_mtime_ns, info.st_size)
    except FileNotFoundError:
        return b"", None


class WriteSession:
    """The state read under the lock: each group file is read (not parsed) when first needed,
    changed line by line (``memself.store.grouplines``), and written back on exit."""

    def __init__(self, store: MemoryStore, lock: LockHandle) -> None:
        self.store = store
        self.lock = lock
        self._lines: dict[str, GroupLines] = {}
        self._stamps: dict[str, journal.Stamp | None] = {}
        self._parsed: dict[str, GroupFile] = {}
        self.trash_file: TrashFile | None = None
        self.dedup_keys: dict[str, dedupkeys.Sidecar] = {}
        self.appends: dict[str, list[Memory]] = {}

    @property
    def trash(self) -> list[TrashEntry] | None:
        return None if self.trash_file is None else self.trash_file.entries

    def stamp(self, group: str) -> journal.Stamp | None:
        """The stamp of the group file as this session first saw it."""
        if group not in self._stamps:
            self._stamps[group] = journal.file_stamp(self.store.paths.group_file(check_group(group)))
        return self._stamps[group]

    def lines(self, group: str) -> GroupLines:
        if group not in self._lines:
            path = self.store.paths.group_file(check_group(group))
            try:
                data, stamp = read_file(path)
            except OSError as exc:
                raise MemselfError(f"读取 {path.name} 失败：{exc.strerror or exc}") from exc
            if group in self._stamps and self._stamps[group] != stamp:
                self.check_still_ours([(path, self._stamps[group])])
            self._stamps[group] = stamp
            self._lines[group] = GroupLines(group, data, partial(_parse_line, group=group))
        return self._lines[group]

    def lines_read(self, group: str) -> GroupLines | None:
        """The group file's lines, when this session read them (a write that only appends does not)."""
        return self._lines.get(group)

    def parsed(self, group: str) -> GroupFile:
        """The whole group file parsed (the duplicate check's slow path, the daily maintenance)."""
        if group not in self._parsed:
            loaded = parse_lines(self.lines(group).data, group)
            loaded.stamp = self.stamp(group)
            self._parsed[group] = loaded
        return self._parsed[group]

    def find(self, mem_id: str) -> tuple[str, Memory] | None:
        """The group file holding ``mem_id`` and its memory; the rule file is searched first."""
        for group in GROUPS:
            memory = self.lines(group).find(mem_id)
            if memory is not None:
                return group, memory
        return None

    def require(self, mem_id: str) -> Memory:
        found = self.find(mem_id)
        if found is None:
            raise NotFound(f"找不到记忆「{mem_id}」")
        return found[1]

    def touch(self, memory: Memory) -> None:
        for group_lines in self._lines.values():
            group_lines.touch(memory)

    def remove(self, group: str, memory: Memory) -> None:
        self.lines(group).remove(memory)

    def append(self, memory: Memory) -> None:
        """A new line at the end of the memory's group file (the original appends the same way);
        the file is not even read unless this session rewrites it anyway."""
        self.stamp(memory.category)
        self.appends.setdefault(memory.category, []).append(memory)

    def changed_groups(self) -> list[str]:
        return [g for g in GROUPS if self.appends.get(g) or (g in self._lines and self._lines[g].dirty)]

    def written(self, group: str) -> list[Memory]:
        """The memories this session adds to or changes in the group file."""
        out = list(self.appends.get(group, []))
        if group in self._lines:
            lines = self._lines[group]
            out += [lines.located[i].memory for i in lines.changed]
        return out

    def changed_in_place(self, group: str) -> list[Memory] | None:
        """The memories whose lines this session rewrote in place, when that is all it did to the
        group file (no line added or removed); None otherwise."""
        lines = self._lines.get(group)
        if lines is None or lines.removed or lines.appended or self.appends.get(group):
            return None
        return [lines.located[i].memory for i in lines.changed]

    def only_appends(self, group: str) -> bool:
        return group not in self._lines or not self._lines[group].dirty

    def load_trash(self) -> list[TrashEntry]:
        if self.trash_file is None:
            self.trash_file = self.store._read_trash_file()
        return self.trash_file.entries

    def check_still_ours(self, targets: Iterable[tuple[Path, journal.Stamp | None]]) -> None:
        """Fail, writing nothing, when the lock was taken from us or a file changed under us."""
        changed = [p.name for p, stamp in targets if journal.file_stamp(p) != stamp]
        held = self.lock.still_held()
        if held and not changed:
            return
        log(self.store.paths, "write-refused-stale", changed=",".join(changed), lock_held=held)
        if not held:
            what = "写入期间记忆写锁被其他程序收回了（多半是原插件在本进程暂停超过 15 秒后按它的规则收回的）"
        else:
            what = f"写入期间 {'、'.join(changed)} 被其他程序改动了（例如手动编辑或原插件）"
        raise LockLost(f"{what}。为了不覆盖别人的改动，这次没有写入任何文件，请重试。")


def dedup_pairs(memories: Iterable[Memory]) -> list[tuple[bytes, str]]:
    """(key hash, id) of each memory, as the duplicate sidecar records them."""
    return [(dedupkeys.key_hash(dedup_key(m.text), m.workspace), m.id) for m in memories]


def _parse_line(raw: bytes, group: str) -> Memory | None:
    records, _ = parse_records(raw)
    return Memory.from_json(records[0], group) if records else None


class MemoryStore:
    def __init__(self, paths: DataPaths | None = None) -> None:
        self.paths = paths or DataPaths.default()

    # ----- reads (no lock: files are replaced atomically) -----

    def _settle(self) -> None:
        """Finish a multi-file write a killed writer committed, before reading its files.

        A reader cannot replay it without the lock; if the lock is busy, its holder replays it
        (or is the writer still renaming), so the reader just reads.
        """
        if not os.path.lexists(journal.intent_path(self.paths)):
            return
        try:
            with write_lock(self.paths, _READ_REPLAY_WAIT_S):
                journal.replay(self.paths)
        except (MemselfError, OSError) as exc:
            log(self.paths, "intent-replay-deferred", error=str(exc))

    def _read_group_file(self, group: str) -> GroupFile:
        path = self.paths.group_file(check_group(group))
        try:
            data, stamp = read_file(path)
        except OSError as exc:
            raise MemselfError(f"读取 {path.name} 失败：{exc.strerror or exc}") from exc
        loaded = parse_lines(data, group)
        loaded.stamp = stamp
        return loaded

    def _read_trash_file(self) -> TrashFile:
        try:
            data, stamp = read_file(self.paths.trash)
        except OSError as exc:
            raise MemselfError(f"读取 {self.paths.trash.name} 失败：{exc.strerror or exc}") from exc
        loaded = parse_trash(data)
        loaded.stamp = stamp
        return loaded

    def load_group(self, group: str) -> GroupFile:
        self._settle()
        return self._read_group_file(group)

    def load_trash(self) -> TrashFile:
        self._settle()
        return self._read_trash_file()

    def read_group(self, group: str) -> list[Memory]:
        loaded = self.load_group(group)
        for bad in loaded.bad_lines:
            log(self.paths, "skip-bad-line", file=f"{group}.jsonl", line=bad.line_no, reason=bad.reason)
        return sort_memories(loaded.memories)

    def active(self, group: str) -> list[Memory]:
        return [m for m in self.read_group(group) if m.active]

    def all(self) -> list[Memory]:
        return [m for g in GROUPS for m in self.read_group(g)]

    def get(self, mem_id: str) -> Memory | None:
        return next((m for m in self.all() if m.id == mem_id), None)

    def trash_entries(self) -> list[TrashEntry]:
        return self.load_trash().entries

    def quarantined(self) -> list[tuple[str, BadLine]]:
        """(file name, line) of every quarantined line of the group files and the trash."""
        out = [(f"{g}.jsonl", b) for g in GROUPS for b in self.load_group(g).bad_lines]
        out += [(self.paths.trash.name, b) for b in self.load_trash().bad_lines]
        return out

    # ----- writes -----

    def prepare_write(self, deep: bool = False) -> None:
        """Under the lock, before loading anything: finish a killed writer's multi-file write and
        clear crash leftovers (``deep``: the index and judge folders too) and a killed append's torn
        last line."""
        journal.replay(self.paths)
        torntail.move_torn_tails(self.paths)
        try:
            journal.cleanup_leftovers(self.paths, deep=deep)
        except OSError as exc:
            log(self.paths, "leftovers-cleanup-failed", error=str(exc))

    @contextlib.contextmanager
    def _writing(self, now: datetime, wait_s: float = DEFAULT_WAIT_S) -> Iterator[WriteSession]:
        try:
            with write_lock(self.paths, wait_s) as lock:
                self.prepare_write()
                session = WriteSession(self, lock)
                yield session
                self._commit(session, now)
                self._committed(session)
        except OSError as exc:
            raise WriteFailed(f"写入记忆失败，原文件保持不变：{exc.strerror or exc}") from exc

    def _committed(self, session: WriteSession) -> None:
        """Called under the lock right after a write: a reader that caches what it parsed can
        bring itself up to date here (``memself.warm.service.CachedReadStore``)."""

    def _commit(self, session: WriteSession, now: datetime) -> None:
        changed = session.changed_groups()
        if len(changed) == 1 and session.trash_file is None and session.only_appends(changed[0]):
            # New memories only: one append to one file, as the original adds a memory.
            group = changed[0]
            path = self.paths.group_file(group)
            session.check_still_ours([(path, session.stamp(group))])
            append_lines(path, b"".join(render_record(m) for m in session.appends[group]))
        else:
            writes: list[tuple[Path, bytes | list[Chunk]]] = []
            stamps: list[tuple[Path, journal.Stamp | None]] = []
            for group in changed:
                path = self.paths.group_file(group)
                lines = session.lines(group)
                lines.appended.extend(session.appends.get(group, []))
                writes.append((path, lines.chunks()))
                stamps.append((path, session.stamp(group)))
            if session.trash_file is not None:
                trash = session.trash_file
                writes.append(
                    (self.paths.trash, render_lines((e.to_json() for e in trash.entries), trash.bad_lines))
                )
                stamps.append((self.paths.trash, trash.stamp))
            if writes:
                journal.commit(self.paths, writes, precheck=lambda: session.check_still_ours(stamps))
        for group in changed:
            self._carry_dedup_keys(session, group)

    def _dedup_keys(self, session: WriteSession, group: str) -> dedupkeys.Sidecar:
        """The group file's dedup hashes: the sidecar when it matches the file, else brought up to
        date (``_catch_up_dedup_keys``)."""
        if group not in session.dedup_keys:
            read = dedupkeys.read(dedupkeys.sidecar_path(self.paths, group))
            found = dedupkeys.written_for(read, session.stamp(group))
            if found is None:
                found = self._catch_up_dedup_keys(session, group, read[1] if read is not None else None)
            session.dedup_keys[group] = found
        return session.dedup_keys[group]

    def _catch_up_dedup_keys(
        self, session: WriteSession, group: str, stale: dedupkeys.Sidecar | None
    ) -> dedupkeys.Sidecar:
        """After another program changed the group file: only the lines it appended when the rest
        is unchanged, else every line."""
        data = session.lines(group).data
        start = None if stale is None else dedupkeys.unchanged_until(stale, data)
        if stale is None or start is None:
            parsed = session.parsed(group)
            pairs = dedup_pairs(parsed.memories)
            log(
                self.paths,
                "dedup-keys-rebuilt",
                group=group,
                lines=len(parsed.memories) + len(parsed.bad_lines),
            )
            return dedupkeys.for_pairs(pairs, len(data), dedupkeys.digest_blocks(data))
        tail = parse_lines(data[start:], group)
        log(self.paths, "dedup-keys-caught-up", group=group, lines=len(tail.memories) + len(tail.bad_lines))
        return dedupkeys.caught_up(stale, data, dedup_pairs(tail.memories))

    def _carry_dedup_keys(self, session: WriteSession, group: str) -> None:
        """After a write, the sidecar follows the file: its keys plus the new and changed texts'.

        A sidecar that did not match the file before the write stays as it was (brought up to date
        by the next add that needs it). A failure here costs the next add a full parse, nothing more."""
        path = dedupkeys.sidecar_path(self.paths, group)
        sidecar = session.dedup_keys.get(group) or dedupkeys.load(path, session.stamp(group))
        if sidecar is None:
            return
        sidecar.add(dedup_pairs(session.written(group)))
        lines = session.lines_read(group)
        unchanged = sidecar.size if lines is None else lines.unchanged_prefix()
        try:
            dedupkeys.save_after_write(path, self.paths.group_file(group), sidecar, unchanged)
        except OSError as exc:
            log(self.paths, "dedup-keys-write-failed", group=group, error=str(exc))

    def create(
        self,
        text: str,
        group: str,
        now: datetime,
        evidence: str = "",
        applies_when: Sequence[str] = (),
        workspace: Workspace | None = None,
    ) -> Memory:
        """A new memory at confidence 0.5, whatever the caller might wish."""
        memory = Memory.create(text, group, now, evidence, applies_when, workspace)
        with self._writing(now) as session:
            session.append(memory)
        return memory

    def add(
        self,
        text: str,
        group: str,
        now: datetime,
        evidence: str = "",
        applies_when: Sequence[str] = (),
        workspace: Workspace | None = None,
    ) -> Added:
        """A new memory, unless ``group`` already holds the same text (``records.dedup_key``):
        then that memory is reinforced as ``reinforce`` does (+0.1 within the daily cap, a
        deprecated one back when the gain lifts it over the line, ``applies_when`` taken only when
        it has none) and nothing is added. A twin in the trash stays there: the new memory is
        created and the result names the twin.

        Only a twin the new memory's scope sees counts (``Memory.visible_in``): a global one, or
        one of the same workspace. Another workspace's identical text is a new memory here, and a
        global create never reinforces one workspace's memory."""
        memory = Memory.create(text, group, now, evidence, applies_when, workspace)
        key = dedup_key(memory.text)

        def twin_of(other: Memory) -> bool:
            return dedup_key(other.text) == key and other.visible_in(memory.workspace)

        wanted = {dedupkeys.key_hash(key, ""), dedupkeys.key_hash(key, memory.workspace)}
        with self._writing(now) as session:
            twin = None
            sidecar = self._dedup_keys(session, memory.category)
            if sidecar.hashes & wanted:
                lines = session.lines(memory.category)
                # The recorded ids first: their lines are found in the bytes, nothing else parsed.
                named = (lines.find(i) for i in sorted(sidecar.ids_for(wanted)))
                twins = [m for m in named if m is not None and twin_of(m)]
                if not twins:
                    twins = [m for m in session.parsed(memory.category).memories if twin_of(m)]
                if twins:
                    # Several twins (written before this check existed): the strongest active one.
                    best = max(twins, key=lambda m: (m.active, m.confidence))
                    twin = lines.find(best.id)
            if twin is not None:
                was_deprecated = twin.deprecated
                gain = confidence.reinforce(twin, now)
                if memory.appliesWhen and not twin.appliesWhen:
                    twin.appliesWhen = memory.appliesWhen
                session.touch(twin)
                return Added(twin, duplicate=True, gain=gain, revived=was_deprecated and not twin.deprecated)
            session.append(memory)
        trashed = [e for e in self._read_trash_file().entries if e.memory.category == memory.category]
        twin_entry = next((e for e in reversed(trashed) if twin_of(e.memory)), None)
        return Added(memory, trashed_twin=twin_entry)

    def reinforce(self, mem_id: str, now: datetime, fill_applies_when: Sequence[str] = ()) -> Change:
        """+0.1 within the daily cap. ``fill_applies_when`` is taken only by a memory that has no
        requests yet: a restatement adds no reason to drop the ones it was given."""
        fill = check_applies_when(fill_applies_when)
        with self._writing(now) as session:
            memory = session.require(mem_id)
            gain = confidence.reinforce(memory, now)
            if fill and not memory.appliesWhen:
                memory.appliesWhen = fill
            session.touch(memory)
        return Change(memory, gain, memory.text)

    def fill_applies_when(
        self, fills: Mapping[str, tuple[str, tuple[str, ...], Sequence[str]]], now: datetime
    ) -> list[str]:
        """Give memories the requests written for them in the background, in one write:
        ``{id: (text asked about, requests it had then, new requests)}``. A memory that is gone,
        whose text changed or whose requests changed since it was asked about is left alone (the
        answer no longer describes it); nothing else of a memory changes. Returns the ids written."""
        written: list[str] = []
        checked = {mem_id: (text, old, check_applies_when(new)) for mem_id, (text, old, new) in fills.items()}
        with self._writing(now) as session:
            for mem_id, (text, old, new) in checked.items():
                found = session.find(mem_id)
                if found is None or not new:
                    continue
                memory = found[1]
                if memory.text != text or memory.appliesWhen != old:
                    continue
                memory.appliesWhen = new
                session.touch(memory)
                written.append(mem_id)
        return written

    def merge_into(
        self, mem_id: str, text: str, now: datetime, applies_when: Sequence[str] | None = None
    ) -> Change:
        """The judge's merge: text replaced, +0.1 within the daily cap (none once the day is full).

        ``applies_when`` replaces the memory's requests when given and not empty (they were
        written for the new text); otherwise a changed text drops them, since they described the
        old one (the background filler asks for new ones)."""
        cleaned = check_text(text)
        requests = check_applies_when(applies_when)
        with self._writing(now) as session:
            memory = session.require(mem_id)
            previous = memory.set_text(cleaned, now)
            if requests or previous != memory.text:
                memory.appliesWhen = requests
            gain = confidence.reinforce(memory, now)
            session.touch(memory)
        return Change(memory, gain, previous)

    def merge_pair(self, keep_id: str, drop_id: str, text: str, now: datetime) -> Change:
        """memory_update's merge: keep ``keep_id`` with ``text``, the higher confidence; drop the other."""
        cleaned = check_text(text)
        if keep_id == drop_id:
            raise InvalidInput("合并需要两条不同的记忆")
        with self._writing(now) as session:
            keep = session.require(keep_id)
            found = session.find(drop_id)
            if found is None:
                raise NotFound(f"找不到记忆「{drop_id}」")
            drop_group, drop = found
            previous = keep.set_text(cleaned, now)
            keep.confidence = round_conf(max(keep.confidence, drop.confidence))
            # The merged text says both: the dropped memory's requests still apply (bounded).
            keep.appliesWhen = check_applies_when(keep.appliesWhen + drop.appliesWhen)
            if keep.confidence > confidence.DEPRECATION_LINE:
                keep.deprecated = False
            session.remove(drop_group, drop)
            session.load_trash().append(TrashEntry(drop, iso(now), f"merged-into:{keep_id}"))
            session.touch(keep)
        return Change(keep, 0.0, previous)

    def replace(
        self, mem_id: str, text: str, now: datetime, applies_when: Sequence[str] | None = None
    ) -> Change:
        """Text replaced, confidence unchanged; ``applies_when`` as in ``merge_into``."""
        cleaned = check_text(text)
        requests = check_applies_when(applies_when)
        with self._writing(now) as session:
            memory = session.require(mem_id)
            previous = memory.set_text(cleaned, now)
            if requests or previous != memory.text:
                memory.appliesWhen = requests
            session.touch(memory)
        return Change(memory, 0.0, previous)

    def move(self, mem_id: str, workspace: Workspace | None, now: datetime) -> tuple[Memory, str]:
        """Give a memory another scope (``workspace``; None: global); nothing else about it
        changes, and a move to the scope it has writes nothing. Returns the memory and its
        previous workspace key ("": it was global)."""
        with self._writing(now) as session:
            memory = session.require(mem_id)
            previous = memory.workspace
            if previous != (workspace.key if workspace else ""):
                memory.set_workspace(workspace)
                session.touch(memory)
        return memory, previous

    def delete(self, ids: Iterable[str], now: datetime, reason: str = "user-delete") -> list[Memory]:
        """Move the memories to the trash; unknown ids are skipped, all unknown is an error."""
        wanted = list(dict.fromkeys(ids))
        removed: list[Memory] = []
        with self._writing(now) as session:
            for mem_id in wanted:
                found = session.find(mem_id)
                if found is None:
                    continue
                group, memory = found
                session.remove(group, memory)
                session.load_trash().append(TrashEntry(memory, iso(now), reason))
                removed.append(memory)
            if not removed:
                raise NotFound("没有找到要删除的记忆：" + "、".join(wanted))
        return removed

    def restore(self, mem_id: str, now: datetime) -> Memory:
        with self._writing(now) as session:
            trash = session.load_trash()
            entry = next((e for e in reversed(trash) if e.memory.id == mem_id), None)
            if entry is None:
                raise NotFound(f"回收站里没有「{mem_id}」")
            if session.find(mem_id) is not None:
                raise InvalidInput(f"记忆「{mem_id}」已经在记忆库里")
            memory = entry.memory
            # Trash written by hand or by the original plugin never went through check_text.
            memory.text = check_text(memory.text)
            trash.remove(entry)
            # A restored memory starts a fresh idle period instead of decaying at once.
            memory.lastSeen = iso(now)
            session.append(memory)
        return memory

    def replace_contents(self, compute: ContentsChange, wait_s: float = DEFAULT_WAIT_S) -> bool:
        """Replace the group files and the trash as one step, under the lock (``memself.sync``).

        ``compute`` sees what the files hold now (memories per group, trash entries) and returns
        their new contents, or None to write nothing. Quarantined lines stay as they are. Returns
        whether anything was written."""
        try:
            with write_lock(self.paths, wait_s) as lock:
                self.prepare_write()
                session = WriteSession(self, lock)
                groups = {g: session.parsed(g) for g in GROUPS}
                trash_data, trash_stamp = read_file(self.paths.trash)
                trash = parse_trash(trash_data)
                result = compute({g: list(f.memories) for g, f in groups.items()}, list(trash.entries))
                if result is None:
                    return False
                new_groups, new_trash = result
                writes: list[tuple[Path, bytes | list[bytes | memoryview]]] = []
                stamps: list[tuple[Path, journal.Stamp | None]] = []
                for group, group_file in groups.items():
                    data = render_lines(
                        (m.to_json() for m in sort_memories(new_groups.get(group, []))), group_file.bad_lines
                    )
                    if data != session.lines(group).data:
                        writes.append((self.paths.group_file(group), data))
                        stamps.append((self.paths.group_file(group), group_file.stamp))
                data = render_lines((e.to_json() for e in new_trash), trash.bad_lines)
                if data != trash_data:
                    writes.append((self.paths.trash, data))
                    stamps.append((self.paths.trash, trash_stamp))
                if not writes:
                    return False
                journal.commit(self.paths, writes, precheck=lambda: session.check_still_ours(stamps))
        except OSError as exc:
            raise WriteFailed(f"写入记忆失败，原文件保持不变：{exc.strerror or exc}") from exc
        return True

    def reward_recall(
        self, ids: Iterable[str], now: datetime, wait_s: float = REWARD_WAIT_S
    ) -> dict[str, float]:
        """+0.05 per recalled id, once per memory per day. Takes no lock when nothing is due.

        Gives up after ``wait_s`` on a busy lock (the caller still has its recall) and logs it.
        """
        wanted = list(dict.fromkeys(ids))
        if not wanted or not self._any_reward_due(wanted, now):
            return {}
        gains: dict[str, float] = {}
        try:
            with self._writing(now, wait_s) as session:
                for mem_id in wanted:
                    found = session.find(mem_id)
                    if found is None or not found[1].active:
                        continue
                    gain = confidence.reward_recall(found[1], now)
                    if gain is not None:
                        gains[mem_id] = gain
                        session.touch(found[1])
        except MemselfError as exc:
            log(self.paths, "recall-reward-failed", ids=",".join(wanted), error=str(exc))
            return {}
        return gains

    def add_counts(
        self,
        counts: Mapping[str, Mapping[str, int]],
        now: datetime,
        stamp_field: str = "",
        wait_s: float = REWARD_WAIT_S,
    ) -> list[str]:
        """Add to optional integer fields of memories (``memself.kept.counts``), kept beside the
        original's fields in ``extra``; ``stamp_field`` is set to ``now`` on each memory touched.
        Confidence, lastSeen and everything the original reads stay as they were. The ids
        written; a busy lock or a failed write is logged and writes nothing."""
        written: list[str] = []
        try:
            with self._writing(now, wait_s) as session:
                for mem_id, fields in counts.items():
                    found = session.find(mem_id)
                    if found is None:
                        continue
                    memory = found[1]
                    for name, add in fields.items():
                        old = memory.extra.get(name)
                        base = old if isinstance(old, int) and not isinstance(old, bool) and old >= 0 else 0
                        memory.extra[name] = base + add
                    if stamp_field:
                        memory.extra[stamp_field] = iso(now)
                    session.touch(memory)
                    written.append(mem_id)
        except MemselfError as exc:
            log(self.paths, "counts-write-failed", ids=",".join(counts), error=str(exc))
            return []
        return written

    def recall_gains(self, ids: Iterable[str], now: datetime) -> dict[str, float]:
        """What ``reward_recall`` would add per id right now, without writing anything: recall
        shows confidences as they will be once the recalled text has reached the host, and the
        reward itself waits until then."""
        import copy

        gains: dict[str, float] = {}
        for memory in self._by_ids(ids).values():
            if memory.active:
                gain = confidence.reward_recall(copy.copy(memory), now)
                if gain:
                    gains[memory.id] = gain
        return gains

    def _by_ids(self, ids: Iterable[str]) -> dict[str, Memory]:
        """The memories with these ids, found by searching the files' bytes (nothing else parsed)."""
        self._settle()
        wanted = list(dict.fromkeys(ids))
        found: dict[str, Memory] = {}
        for group in GROUPS:
            if len(found) == len(wanted):
                break
            path = self.paths.group_file(group)
            try:
                data, _ = read_file(path)
            except OSError as exc:
                raise MemselfError(f"读取 {path.name} 失败：{exc.strerror or exc}") from exc
            lines = GroupLines(group, data, partial(_parse_line, group=group))
            for mem_id in wanted:
                memory = None if mem_id in found else lines.find(mem_id)
                if memory is not None:
                    found[mem_id] = memory
        return found

    def _any_reward_due(self, ids: list[str], now: datetime) -> bool:
        day = local_day(now)
        for memory in self._by_ids(ids).values():
            if memory.active:
                created = parse_iso(memory.createdAt)
                created_today = created is not None and local_day(created) == day
                if (
                    not (memory.gainDay == day and memory.gainToday >= confidence.RECALL_STEP)
                    and not created_today
                ):
                    return True
        return False
