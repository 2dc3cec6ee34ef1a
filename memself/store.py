"""The memory store: two group files, the trash, and every write under one lock, atomically.

Reads are lenient (a corrupt line is skipped and reported); writes keep such lines verbatim at
the end of the file so that nothing a user had is lost by a rewrite. Every write regenerates
``memories.html`` and tells listeners which ids changed.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime

from memself import confidence
from memself.atomic import write_atomic
from memself.errors import InvalidInput, MemselfError, NotFound, WriteFailed
from memself.lock import DEFAULT_WAIT_S, REWARD_WAIT_S, write_lock
from memself.logs import log
from memself.paths import DataPaths
from memself.records import (
    GROUPS,
    Memory,
    check_group,
    check_text,
    round_conf,
    sort_memories,
)
from memself.timeutil import iso, local_day, parse_iso

TRASH_KEEP_DAYS = 30
ChangeListener = Callable[[DataPaths, set[str]], None]
_listeners: list[ChangeListener] = []


def on_change(listener: ChangeListener) -> None:
    """Call ``listener(paths, changed_ids)`` after every successful write (once per listener)."""
    if listener not in _listeners:
        _listeners.append(listener)


@dataclass
class BadLine:
    line_no: int
    raw: str
    reason: str


@dataclass
class GroupFile:
    group: str
    memories: list[Memory] = field(default_factory=list)
    bad_lines: list[BadLine] = field(default_factory=list)


@dataclass
class TrashEntry:
    memory: Memory
    deleted_at: str
    reason: str

    def to_json(self) -> dict[str, object]:
        return {**self.memory.to_json(), "deletedAt": self.deleted_at, "deleteReason": self.reason}


@dataclass
class Change:
    memory: Memory
    gain: float
    previous_text: str


def parse_lines(text: str, group: str) -> GroupFile:
    result = GroupFile(group)
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError:
            result.bad_lines.append(BadLine(number, line, "不是合法的 JSON"))
            continue
        memory = Memory.from_json(raw, group)
        if memory is None:
            result.bad_lines.append(BadLine(number, line, "缺少 id 或 text"))
            continue
        result.memories.append(memory)
    return result


def render_lines(records: Iterable[dict[str, object]], bad_lines: Iterable[BadLine] = ()) -> str:
    lines = [json.dumps(r, ensure_ascii=False, separators=(",", ":")) for r in records]
    lines.extend(b.raw for b in bad_lines)
    return "".join(line + "\n" for line in lines)


class _WriteSession:
    """The state loaded under the lock; changed groups are written back on exit."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.groups = {g: store.load_group(g) for g in GROUPS}
        self.dirty: set[str] = set()
        self.changed_ids: set[str] = set()
        self.trash: list[TrashEntry] | None = None

    def find(self, mem_id: str) -> tuple[GroupFile, Memory] | None:
        for group_file in self.groups.values():
            for memory in group_file.memories:
                if memory.id == mem_id:
                    return group_file, memory
        return None

    def require(self, mem_id: str) -> Memory:
        found = self.find(mem_id)
        if found is None:
            raise NotFound(f"找不到记忆「{mem_id}」")
        return found[1]

    def touch(self, memory: Memory) -> None:
        self.dirty.add(memory.category)
        self.changed_ids.add(memory.id)

    def load_trash(self) -> list[TrashEntry]:
        if self.trash is None:
            self.trash = self.store.trash_entries()
        return self.trash


class MemoryStore:
    def __init__(self, paths: DataPaths | None = None) -> None:
        self.paths = paths or DataPaths.default()

    # ----- reads (no lock: files are replaced atomically) -----

    def load_group(self, group: str) -> GroupFile:
        path = self.paths.group_file(check_group(group))
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return GroupFile(group)
        except (OSError, UnicodeDecodeError) as exc:
            raise MemselfError(f"读取 {path.name} 失败：{exc}") from exc
        return parse_lines(text, group)

    def read_group(self, group: str) -> list[Memory]:
        loaded = self.load_group(group)
        for bad in loaded.bad_lines:
            log(self.paths, "skip-bad-line", file=f"{group}.jsonl", line=bad.line_no,
                reason=bad.reason)
        return sort_memories(loaded.memories)

    def active(self, group: str) -> list[Memory]:
        return [m for m in self.read_group(group) if m.active]

    def all(self) -> list[Memory]:
        return [m for g in GROUPS for m in self.read_group(g)]

    def get(self, mem_id: str) -> Memory | None:
        return next((m for m in self.all() if m.id == mem_id), None)

    def trash_entries(self) -> list[TrashEntry]:
        try:
            text = self.paths.trash.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        entries = []
        for line in text.splitlines():
            try:
                raw = json.loads(line)
            except json.JSONDecodeError:
                continue
            memory = Memory.from_json(raw, raw.get("category", "") if isinstance(raw, dict) else "")
            if memory is None:
                continue
            deleted_at = memory.extra.pop("deletedAt", "")
            reason = memory.extra.pop("deleteReason", "")
            entries.append(TrashEntry(memory, str(deleted_at), str(reason)))
        return entries

    # ----- writes -----

    @contextlib.contextmanager
    def _writing(self, now: datetime, wait_s: float = DEFAULT_WAIT_S) -> Iterator[_WriteSession]:
        try:
            with write_lock(self.paths, wait_s):
                session = _WriteSession(self)
                yield session
                self._commit(session, now)
        except OSError as exc:
            raise WriteFailed(f"写入记忆失败，原文件保持不变：{exc.strerror or exc}") from exc
        if session.changed_ids:
            for listener in list(_listeners):
                try:
                    listener(self.paths, set(session.changed_ids))
                except Exception as exc:
                    log(self.paths, "change-listener-failed", error=str(exc))

    def _commit(self, session: _WriteSession, now: datetime) -> None:
        for group in GROUPS:
            if group in session.dirty:
                gf = session.groups[group]
                records = [m.to_json() for m in sort_memories(gf.memories)]
                write_atomic(self.paths.group_file(group), render_lines(records, gf.bad_lines))
        if session.trash is not None:
            write_atomic(self.paths.trash, render_lines(e.to_json() for e in session.trash))
        if session.dirty or session.trash is not None:
            self._refresh_snapshot({g: gf.memories for g, gf in session.groups.items()}, now)

    def _refresh_snapshot(self, groups: dict[str, list[Memory]], now: datetime) -> None:
        try:
            from memself.snapshot import write_snapshot
        except ImportError:
            return
        try:
            write_snapshot(self.paths, {g: sort_memories(ms) for g, ms in groups.items()}, now)
        except OSError as exc:
            log(self.paths, "snapshot-failed", error=str(exc))

    def refresh_snapshot(self, now: datetime) -> None:
        """Rewrite memories.html from the files as they are (``memself open``)."""
        self.paths.ensure()
        self._refresh_snapshot({g: self.read_group(g) for g in GROUPS}, now)

    def create(self, text: str, group: str, now: datetime, evidence: str = "") -> Memory:
        """A new memory at confidence 0.5, whatever the caller might wish."""
        memory = Memory.create(text, group, now, evidence)
        with self._writing(now) as session:
            session.groups[memory.category].memories.append(memory)
            session.touch(memory)
        return memory

    def reinforce(self, mem_id: str, now: datetime) -> Change:
        with self._writing(now) as session:
            memory = session.require(mem_id)
            gain = confidence.reinforce(memory, now)
            session.touch(memory)
        return Change(memory, gain, memory.text)

    def merge_into(self, mem_id: str, text: str, now: datetime) -> Change:
        """The judge's merge: text replaced, +0.1 within the daily cap (none once the day is full)."""
        cleaned = check_text(text)
        with self._writing(now) as session:
            memory = session.require(mem_id)
            previous = memory.text
            memory.text = cleaned
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
            drop_file, drop = found
            previous = keep.text
            keep.text = cleaned
            keep.confidence = round_conf(max(keep.confidence, drop.confidence))
            if keep.confidence > confidence.DEPRECATION_LINE:
                keep.deprecated = False
            drop_file.memories.remove(drop)
            session.load_trash().append(TrashEntry(drop, iso(now), f"merged-into:{keep_id}"))
            session.touch(keep)
            session.dirty.add(drop.category)
            session.changed_ids.add(drop.id)
        return Change(keep, 0.0, previous)

    def replace(self, mem_id: str, text: str, now: datetime) -> Change:
        cleaned = check_text(text)
        with self._writing(now) as session:
            memory = session.require(mem_id)
            previous = memory.text
            memory.text = cleaned
            session.touch(memory)
        return Change(memory, 0.0, previous)

    def delete(self, ids: Iterable[str], now: datetime, reason: str = "user-delete") -> list[Memory]:
        """Move the memories to the trash; unknown ids are skipped, all unknown is an error."""
        wanted = list(dict.fromkeys(ids))
        removed: list[Memory] = []
        with self._writing(now) as session:
            for mem_id in wanted:
                found = session.find(mem_id)
                if found is None:
                    continue
                group_file, memory = found
                group_file.memories.remove(memory)
                session.load_trash().append(TrashEntry(memory, iso(now), reason))
                session.touch(memory)
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
            trash.remove(entry)
            memory = entry.memory
            # A restored memory starts a fresh idle period instead of decaying at once.
            memory.lastSeen = iso(now)
            session.groups[memory.category].memories.append(memory)
            session.touch(memory)
        return memory

    def reward_recall(self, ids: Iterable[str], now: datetime,
                      wait_s: float = REWARD_WAIT_S) -> dict[str, float]:
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

    def _any_reward_due(self, ids: list[str], now: datetime) -> bool:
        day = local_day(now)
        wanted = set(ids)
        for memory in self.all():
            if memory.id in wanted and memory.active:
                created = parse_iso(memory.createdAt)
                created_today = created is not None and local_day(created) == day
                if not (memory.gainDay == day and memory.gainToday >= confidence.RECALL_STEP) \
                        and not created_today:
                    return True
        return False
