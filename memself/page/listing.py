"""What ``memself list`` shows, without parsing every memory on every call.

Per group file it keeps a summary: the count per workspace (with its name), the most confident
``TOP`` memories of each workspace (in the store's order: confidence, then last activity), and
the quarantined lines. Summaries are cached in ``list-view.json`` under the stamp (inode, mtime,
size) of exactly the file version they were made from; a file with another stamp is read again
through the store, so a hand edit or the original's append is never missed. ``memself list``
refreshes the cache when it had to read, and so does the engine's background page refresh.

Views taken from the summaries are exact: a workspace's view (global plus that workspace) takes
the first ``n <= TOP`` of the union of two top lists, which holds the first ``n`` of the union.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from memself.atomic import write_atomic
from memself.errors import MemselfError
from memself.logs import log
from memself.paths import DataPaths
from memself.store.memory_store import (
    BadLine,
    GroupFile,
    MemoryStore,
    TrashFile,
    journal,
    parse_records,
    read_file,
)
from memself.store.records import DEPRECATION_LINE, GROUPS, Memory, round_conf, sort_memories

TOP = 50
# Above this many memories the page (``refresh_views``) embeds only the ``TOP`` first of each
# scope's groups: a bigger page costs more to generate than anyone reads in a browser.
FULL_PAGE_MAX = 5000
# Group files this small hold far fewer memories than that: the page reads them whole at once.
FULL_PAGE_MIN_BYTES = 512 * 1024
CACHE_NAME = "list-view.json"
_FORMAT = 3
TRASH = "trash"


def cache_path(paths: DataPaths) -> Path:
    return paths.root / CACHE_NAME


@dataclass
class Summary:
    """One file's summary: ``scopes`` maps a workspace key ("" global) to [name, count, how many
    of them are deprecated]."""

    stamp: list[int] | None
    scopes: dict[str, list[Any]] = field(default_factory=dict)
    top: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    problems: list[list[Any]] = field(default_factory=list)
    # [size, lines, sha256] of the whole lines summarized, when a line scan made it: a file that
    # only grew by appended lines (as the original adds a memory) is summarized from there on.
    prefix: list[Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "stamp": self.stamp,
            "scopes": self.scopes,
            "top": self.top,
            "problems": self.problems,
            "prefix": self.prefix,
        }


def _stamp(stamp: journal.Stamp | None) -> list[int] | None:
    return None if stamp is None else [int(part) for part in stamp]


def _problems(bad: list[BadLine]) -> list[list[Any]]:
    return [[b.line_no, b.reason] for b in bad]


def summarize_group(loaded: GroupFile) -> Summary:
    summary = Summary(_stamp(loaded.stamp), problems=_problems(loaded.bad_lines))
    by_scope: dict[str, list[Memory]] = {}
    for memory in loaded.memories:
        entry = summary.scopes.setdefault(memory.workspace, [memory.workspaceName, 0, 0])
        entry[1] += 1
        entry[2] += int(not memory.active)
        by_scope.setdefault(memory.workspace, []).append(memory)
    summary.top = {key: [m.to_json() for m in sort_memories(ms)[:TOP]] for key, ms in by_scope.items()}
    return summary


def scan_group(paths: DataPaths, group: str, base: Summary | None = None) -> Summary:
    """What ``summarize_group`` makes of the file as the store would load it, without building
    a memory per line: a record is parsed, checked and counted, and only the ones that reach a
    top list become memories. The heap key mirrors ``sort_memories``: rounded confidence, then
    last activity, then file order (the sort is stable).

    With ``base`` (an older summary of the same file) whose lines are still the file's first
    bytes, unchanged, only the lines after them are read: the top lists of the union are within
    the old top lists plus the new lines, and old lines come first in file order.
    """
    try:
        data, stamp = read_file(paths.group_file(group))
    except OSError as exc:
        raise MemselfError(f"读取 {group}.jsonl 失败：{exc.strerror or exc}") from exc
    summary = Summary(_stamp(stamp))
    heaps: dict[str, list[tuple[float, str, int, dict[str, Any]]]] = {}
    start, number = 0, 0
    if base is not None and _extends(data, base.prefix):
        assert base.prefix is not None
        start, number = int(base.prefix[0]), int(base.prefix[1])
        summary.scopes = {key: list(entry) for key, entry in base.scopes.items()}
        summary.problems = [list(p) for p in base.problems]
        for key, records in base.top.items():
            heaps[key] = [_heap_item(r, -rank) for rank, r in enumerate(records, start=1)]
            heapq.heapify(heaps[key])
    scopes: dict[tuple[object, object], tuple[str, str]] = {}
    for raw in _lines(data, start):
        number += 1
        records, bad = parse_records(raw)
        summary.problems += [[number, b.reason] for b in bad]
        for record in records:
            key, name = _scope_of(record, group, scopes)
            entry = summary.scopes.setdefault(key, [name, 0, 0])
            entry[1] += 1
            entry[2] += int(_deprecated(record))
            item = _heap_item(record, number)
            heap = heaps.setdefault(key, [])
            if len(heap) < TOP:
                heapq.heappush(heap, item)
            elif item[:3] > heap[0][:3]:
                heapq.heapreplace(heap, item)
    for key, heap in heaps.items():
        ordered = [r for *_, r in sorted(heap, key=lambda i: i[:3], reverse=True)]
        summary.top[key] = [
            m.to_json() for m in (Memory.from_json(r, group) for r in ordered) if m is not None
        ]
    if not data or data.endswith(b"\n"):  # a last line without its newline may still grow
        summary.prefix = [len(data), number, hashlib.sha256(data).hexdigest()]
    return summary


def _lines(data: bytes, start: int) -> Iterator[bytes]:
    """The lines of ``data`` from ``start``, without their newlines and without copying it whole."""
    end = len(data)
    while start < end:
        stop = data.find(b"\n", start)
        stop = end if stop < 0 else stop
        yield data[start:stop]
        start = stop + 1


def _extends(data: bytes, prefix: list[Any] | None) -> bool:
    if not prefix:
        return False
    size, _, digest = prefix
    if not isinstance(size, int) or not 0 < size <= len(data) or data[size - 1 : size] != b"\n":
        return False
    return hashlib.sha256(memoryview(data)[:size]).hexdigest() == digest


def _heap_item(record: dict[str, Any], number: int) -> tuple[float, str, int, dict[str, Any]]:
    return (round_conf(_confidence(record)), _last_active(record), -number, record)


def _scope_of(
    record: dict[str, Any], group: str, seen: dict[tuple[object, object], tuple[str, str]]
) -> tuple[str, str]:
    """The workspace key and name a memory read from ``record`` gets (the records module decides;
    asked once per distinct pair of raw values)."""
    pair = (record.get("workspace"), record.get("workspaceName"))
    hashable = all(v is None or isinstance(v, str) for v in pair)
    if hashable and pair in seen:
        return seen[pair]
    probe = Memory.from_json({"id": "-", "text": "-", "workspace": pair[0], "workspaceName": pair[1]}, group)
    found = ("", "") if probe is None else (probe.workspace, probe.workspaceName)
    if hashable:
        seen[pair] = found
    return found


def _confidence(record: dict[str, Any]) -> float:
    # parse_records already refused a confidence that is not a finite number.
    value = record.get("confidence")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.5


def _deprecated(record: dict[str, Any]) -> bool:
    # ``Memory.active``, from the raw record.
    return record.get("deprecated") is True or not _confidence(record) > DEPRECATION_LINE


def _last_active(record: dict[str, Any]) -> str:
    last, created = record.get("lastSeen"), record.get("createdAt")
    return (last if isinstance(last, str) else "") or (created if isinstance(created, str) else "")


def summarize_trash(loaded: TrashFile) -> Summary:
    return Summary(_stamp(loaded.stamp), problems=_problems(loaded.bad_lines))


def _read_cache(paths: DataPaths) -> dict[str, Any]:
    try:
        raw = json.loads(cache_path(paths).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(raw, dict) or raw.get("format") != _FORMAT or not isinstance(raw.get("files"), dict):
        return {}
    return dict(raw["files"])


def _cached(entry: object, stamp: journal.Stamp | None, any_stamp: bool = False) -> Summary | None:
    """The cached summary when it was made from the file version ``stamp`` (or from any version)."""
    if not isinstance(entry, dict) or not (
        any_stamp or (stamp is not None and entry.get("stamp") == _stamp(stamp))
    ):
        return None
    try:
        prefix = entry.get("prefix")
        return Summary(
            entry["stamp"],
            dict(entry["scopes"]),
            dict(entry["top"]),
            list(entry["problems"]),
            list(prefix) if isinstance(prefix, list) and len(prefix) == 3 else None,
        )
    except (KeyError, TypeError, ValueError):
        return None


def save(paths: DataPaths, summaries: dict[str, Summary]) -> None:
    """Write the cache; a failure only costs the next ``list`` a full read."""
    files = {name: s.to_json() for name, s in summaries.items() if s.stamp is not None}
    data = json.dumps({"format": _FORMAT, "files": files}, ensure_ascii=False, separators=(",", ":"))
    try:
        write_atomic(cache_path(paths), data)
    except OSError as exc:
        log(paths, "list-cache-failed", error=str(exc))


def load(store: MemoryStore) -> dict[str, Summary]:
    """Every group file's summary and the trash's, from the cache where it is current."""
    paths = store.paths
    # A killed writer's committed intent: the store's reads settle it; no cache shortcut meanwhile.
    settled = not os.path.lexists(journal.intent_path(paths))
    cache = _read_cache(paths) if settled else {}
    out: dict[str, Summary] = {}
    fresh = False
    for group in GROUPS:
        entry = cache.get(group)
        found = _cached(entry, journal.file_stamp(paths.group_file(group)))
        if found is None:
            if settled:
                found = scan_group(paths, group, _cached(entry, None, any_stamp=True))
            else:
                found = summarize_group(store.load_group(group))
            fresh = True
        out[group] = found
    found = _cached(cache.get(TRASH), journal.file_stamp(paths.trash))
    if found is None:
        found, fresh = summarize_trash(store.load_trash()), True
    out[TRASH] = found
    if fresh and paths.root.is_dir():
        save(paths, out)
    return out


def refresh_views(paths: DataPaths, now: datetime) -> Path:
    """Regenerate memories.html and these summaries; the page's path.

    Up to ``FULL_PAGE_MAX`` memories the page embeds every one, from one read of the files (the
    summaries are consulted first only when the files are larger than ``FULL_PAGE_MIN_BYTES``). A
    larger store's page is made from the summaries (read again only where a file changed): the
    ``TOP`` first memories of each scope's groups and the store's counts."""
    from memself.page.html import write_snapshot

    store = MemoryStore(paths)
    if _group_bytes(paths) > FULL_PAGE_MIN_BYTES:
        summaries = load(store)
        if sum(int(entry[1]) for g in GROUPS for entry in summaries[g].scopes.values()) > FULL_PAGE_MAX:
            return _write_partial(paths, summaries, now)
    loaded = {g: store.load_group(g) for g in GROUPS}
    page_path = write_snapshot(
        paths, {g: sort_memories(gf.memories) for g, gf in loaded.items()}, now, _team(loaded)
    )
    summaries = {g: summarize_group(gf) for g, gf in loaded.items()}
    summaries[TRASH] = summarize_trash(store.load_trash())
    save(paths, summaries)
    return page_path


def _group_bytes(paths: DataPaths) -> int:
    stamps = [journal.file_stamp(paths.group_file(g)) for g in GROUPS]
    return sum(stamp[2] for stamp in stamps if stamp is not None)


def _write_partial(paths: DataPaths, summaries: dict[str, Summary], now: datetime) -> Path:
    """The page of a store too large to embed whole, from its summaries alone."""
    from memself.page.html import write_snapshot

    groups: dict[str, list[Memory]] = {}
    totals: dict[tuple[str, str], tuple[int, int]] = {}
    for group in GROUPS:
        records = [r for key in summaries[group].scopes for r in summaries[group].top.get(key, [])]
        groups[group] = [m for m in (Memory.from_json(r, group) for r in records) if m is not None]
        for key, (_, count, deprecated) in summaries[group].scopes.items():
            totals[(group, key)] = (int(count), int(deprecated))
    return write_snapshot(paths, groups, now, _team_of(known_workspaces(summaries)), totals)


def _team(loaded: dict[str, GroupFile]) -> list[Memory]:
    """The ``.memself/`` memories of every repository the user's own memories name."""
    return _team_of({m.workspace for gf in loaded.values() for m in gf.memories if m.workspace})


def _team_of(workspaces: set[str]) -> list[Memory]:
    from memself.store.team import team_memories

    return [m for root in sorted(w for w in workspaces if w) for g in GROUPS for m in team_memories(root, g)]


def known_workspaces(summaries: dict[str, Summary]) -> set[str]:
    return {key for group in GROUPS for key in summaries[group].scopes}


def scope_counts(summaries: dict[str, Summary], view: str | None) -> list[tuple[str, str, dict[str, int]]]:
    """(key, name, count per group) per scope: global first (always), then each workspace by
    name and path; with a ``view``, only the scopes a session there sees."""
    names: dict[str, str] = {"": ""}
    counts: dict[str, dict[str, int]] = {"": dict.fromkeys(GROUPS, 0)}
    for group in GROUPS:
        for key, (name, count, _) in summaries[group].scopes.items():
            if view is not None and key not in ("", view):
                continue
            names.setdefault(key, str(name))
            counts.setdefault(key, dict.fromkeys(GROUPS, 0))[group] += int(count)
    keys = sorted(names, key=lambda k: (k != "", names[k].casefold(), k))
    return [(key, names[key], counts[key]) for key in keys]


def deprecated_counts(summaries: dict[str, Summary]) -> dict[str, int]:
    """How many memories of each group are deprecated (never injected or recalled)."""
    return {g: sum(int(entry[2]) for entry in summaries[g].scopes.values()) for g in GROUPS}


def problems(summaries: dict[str, Summary], trash_name: str) -> list[tuple[str, int, str]]:
    """(file name, line, reason) of every quarantined line, group files first."""
    return [
        (trash_name if name == TRASH else f"{name}.jsonl", int(line), str(why))
        for name, summary in summaries.items()
        for line, why in summary.problems
    ]


def top(summaries: dict[str, Summary], view: str | None, count: int) -> list[Memory] | None:
    """The ``count`` most confident memories shown (both groups), or None if the summaries do
    not hold that many (``count`` above ``TOP``)."""
    if count > TOP:
        return None
    found: list[Memory] = []
    for group in GROUPS:
        for key, records in summaries[group].top.items():
            if view is not None and key not in ("", view):
                continue
            found += [m for m in (Memory.from_json(r, group) for r in records) if m is not None]
    return sort_memories(found)[:count]


def page(
    store: MemoryStore, summaries: dict[str, Summary], view: str | None, offset: int, limit: int
) -> list[Memory]:
    """Memories ``offset`` to ``offset + limit`` in the store's order over both groups."""
    quick = top(summaries, view, offset + limit)
    if quick is not None:
        return quick[offset:]
    if os.path.lexists(journal.intent_path(store.paths)):  # the store's read settles it first
        shown = [
            m for g in GROUPS for m in store.load_group(g).memories if view is None or m.visible_in(view)
        ]
        return sort_memories(shown)[offset : offset + limit]
    return _ranked(store.paths, view, offset + limit)[offset:]


def _ranked(paths: DataPaths, view: str | None, count: int) -> list[Memory]:
    """The first ``count`` memories shown, in the store's order over both groups, from a line
    scan that keeps only ``count`` records at a time. Ties keep the order of the groups and of
    the lines, as ``sort_memories`` over both groups' memories does."""
    heap: list[tuple[float, str, int, str, dict[str, Any]]] = []
    before = 0
    for group in GROUPS:
        try:
            data, _ = read_file(paths.group_file(group))
        except OSError as exc:
            raise MemselfError(f"读取 {group}.jsonl 失败：{exc.strerror or exc}") from exc
        scopes: dict[tuple[object, object], tuple[str, str]] = {}
        number = 0
        for raw in _lines(data, 0):
            number += 1
            for record in parse_records(raw)[0]:
                if view is not None and _scope_of(record, group, scopes)[0] not in ("", view):
                    continue
                conf, last, rank, _ = _heap_item(record, before + number)
                item = (conf, last, rank, group, record)
                if len(heap) < count:
                    heapq.heappush(heap, item)
                elif item[:3] > heap[0][:3]:
                    heapq.heapreplace(heap, item)
        before += number
    ordered = sorted(heap, key=lambda i: i[:3], reverse=True)
    return [m for m in (Memory.from_json(r, g) for *_, g, r in ordered) if m is not None]


def stream(paths: DataPaths, group: str) -> Iterator[Memory | BadLine]:
    """A group file's memories in file order, read line by line; quarantined lines as they come."""
    try:
        handle = open(paths.group_file(group), "rb")
    except FileNotFoundError:
        return
    with handle:
        for number, raw in enumerate(handle, start=1):
            records, bad = parse_records(raw.rstrip(b"\n"))
            for line in bad:
                yield BadLine(number, line.raw, line.reason)
            for record in records:
                memory = Memory.from_json(record, group)
                if memory is not None:
                    yield memory
