"""A group file as raw bytes, changed line by line: a write costs what it changes.

A write that changes a few memories finds their lines by searching the bytes for each id (only
those lines are parsed), and writes the file back as the untouched byte ranges around the
replaced or removed lines, followed by the new lines; the other lines are never decoded. A line
keeps its place when its memory changes, so the file drifts from the original's sorted order:
both readers accept any order, and the daily maintenance writes it sorted again (compaction).

An id is found through its JSON form as memself and the original write it (``json.dumps`` /
``JSON.stringify``: plain characters unescaped, or ASCII with ``\\u`` escapes); a hand edit that
escapes plain characters of an id hides that memory from writes by id, never from reads.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from memself.store.recordlines import render_memory as render_record
from memself.store.records import Memory

Chunk = bytes | memoryview
LineParser = Callable[[bytes], Memory | None]


@dataclass
class _Located:
    start: int  # offset of the line's first byte
    end: int  # offset of its newline (or the end of the data)
    memory: Memory


@dataclass
class GroupLines:
    group: str
    data: bytes
    parse_line: LineParser
    located: dict[str, _Located] = field(default_factory=dict)
    changed: set[str] = field(default_factory=set)  # ids whose line is rewritten in place
    removed: set[str] = field(default_factory=set)  # ids whose line is dropped
    appended: list[Memory] = field(default_factory=list)

    def find(self, mem_id: str) -> Memory | None:
        """The memory of the first line (in file order) whose record has this id."""
        if mem_id in self.located:
            return None if mem_id in self.removed else self.located[mem_id].memory
        hits: list[tuple[int, int]] = []
        for needle in _needles(mem_id):
            pos = self.data.find(needle)
            while pos != -1:
                start = self.data.rfind(b"\n", 0, pos) + 1
                end = self.data.find(b"\n", pos)
                end = len(self.data) if end == -1 else end
                hits.append((start, end))
                pos = self.data.find(needle, end)
        for start, end in sorted(set(hits)):
            memory = self.parse_line(self.data[start:end])
            if memory is not None and memory.id == mem_id:
                self.located[mem_id] = _Located(start, end, memory)
                return memory
        return None

    def touch(self, memory: Memory) -> None:
        if memory.id in self.located and self.located[memory.id].memory is memory:
            self.changed.add(memory.id)

    def remove(self, memory: Memory) -> None:
        if memory in self.appended:
            self.appended.remove(memory)
            return
        self.removed.add(memory.id)
        self.changed.discard(memory.id)

    def append(self, memory: Memory) -> None:
        self.appended.append(memory)

    @property
    def dirty(self) -> bool:
        return bool(self.changed or self.removed or self.appended)

    def unchanged_prefix(self) -> int:
        """How many bytes at the start of the file the new file (``chunks``) keeps as they were."""
        return min((self.located[i].start for i in self.changed | self.removed), default=len(self.data))

    def chunks(self) -> list[Chunk]:
        """The new file: the untouched ranges as they were, the changed lines, the new ones."""
        edits = sorted((self.located[i].start, self.located[i].end, i) for i in self.changed | self.removed)
        view = memoryview(self.data)
        out: list[Chunk] = []
        pos = 0
        for start, end, mem_id in edits:
            out.append(view[pos:start])
            if mem_id not in self.removed:
                out.append(render_record(self.located[mem_id].memory))
            pos = min(end + 1, len(self.data))
        if pos < len(self.data):
            out.append(view[pos:])
            if not self.data.endswith(b"\n"):
                out.append(b"\n")  # a last line without its newline stays a line of its own
        out.extend(render_record(m) for m in self.appended)
        return out


def _needles(mem_id: str) -> list[bytes]:
    plain = json.dumps(mem_id, ensure_ascii=False)[1:-1].encode("utf-8", "surrogatepass")
    ascii_form = json.dumps(mem_id)[1:-1].encode("ascii")
    return [plain] if plain == ascii_form else [plain, ascii_form]
