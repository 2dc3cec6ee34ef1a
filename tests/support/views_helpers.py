"""Builders for the "applies when" filler's tests: an original-style data directory of memories
without requests, a judge that writes requests from what it receives, and the CLI as a process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from tests.support.helpers import write_records
from tests.support.judge_server import Reply, plain

REPO = Path(__file__).resolve().parents[2]
EVAL = REPO / "eval"
PREFIX = "memories："


def sent_memories(body: dict[str, Any]) -> list[dict[str, str]]:
    """The memories a filler request carries (its user message's JSON)."""
    for message in body.get("messages", []):
        if message.get("role") == "user" and str(message.get("content", "")).startswith(PREFIX):
            return list(json.loads(message["content"][len(PREFIX) :]))
    return []


def made_up(text: str) -> list[str]:
    """Requests derived from a text deterministically, short enough never to restate it."""
    head = "".join(c for c in text if not c.isspace())[:5]
    return [f"帮我看看{head}", f"{head}怎么弄", f"处理一下{head}相关的事"]


class WritingJudge:
    """A judge that answers each filler request with requests for every memory it was sent:
    from ``table`` (text -> requests) when the text is there, else ``made_up``, after ``delay``
    seconds. ``hold_at``: the n-th request (1-based) waits, after ``arrived`` is set, until
    ``release`` is set."""

    def __init__(
        self, table: dict[str, list[str]] | None = None, hold_at: int = 0, delay: float = 0.0
    ) -> None:
        self.table = table or {}
        self.hold_at = hold_at
        self.delay = delay
        self.count = 0
        self.arrived = threading.Event()
        self.release = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            self.count += 1
            number = self.count
        time.sleep(self.delay)
        if number == self.hold_at:
            self.arrived.set()
            self.release.wait(30)
        answer = {m["id"]: self.table.get(m["text"]) or made_up(m["text"]) for m in sent_memories(body)}
        return plain(json.dumps(answer, ensure_ascii=False))


def original_record(mem_id: str, text: str, group: str, conf: float = 0.8) -> dict[str, Any]:
    """A record as the original plugin writes it (no memself fields)."""
    return {
        "id": mem_id,
        "text": text,
        "confidence": conf,
        "category": group,
        "evidence": "用户陈述",
        "firstSeen": "2026-10-01T02:00:00.000Z",
        "lastSeen": "2026-11-20T02:00:00.000Z",
        "deprecated": False,
        "createdAt": "2026-10-01T02:00:00.000Z",
        "observations": 3,
    }


def original_store(n: int, id_prefix: str, workspace: str = "") -> tuple[DataPaths, MemoryStore]:
    """The test's data directory with ``n`` project facts as the original wrote them (no requests),
    the first half in ``workspace`` when one is given."""
    paths = DataPaths.default()
    paths.ensure()
    store = MemoryStore(paths)
    rows = [
        original_record(
            f"mem-{id_prefix}{i:03d}-abcdef",
            f"第 {i} 条记忆：服务 svc{i} 的日志在 /var/log/svc{i}",
            "project",
        )
        for i in range(n)
    ]
    if workspace:
        for row in rows[: n // 2]:
            row["workspace"] = workspace
    write_records(store, "project", rows)
    return paths, store


def original_data_dir(folder: Path, memories: Sequence[tuple[str, str, str]]) -> Path:
    """An original-style data directory holding ``memories`` ((id, group, text)), as the Node
    plugin leaves it (compact JSON lines, its config)."""
    folder.mkdir(parents=True, exist_ok=True)
    for group in ("rule", "project"):
        lines = [
            json.dumps(original_record(i, t, g), ensure_ascii=False, separators=(",", ":"))
            for i, g, t in memories
            if g == group
        ]
        (folder / f"{group}.jsonl").write_text("".join(line + "\n" for line in lines), "utf-8")
    (folder / "config.json").write_text(json.dumps({"recallTopK": 3}, indent=2) + "\n", "utf-8")
    return folder


def copy_into(source: Path, paths: DataPaths) -> DataPaths:
    shutil.copytree(source, paths.root, dirs_exist_ok=True)
    return paths


Memories = list[tuple[str, str, str]]


# A fixed choice of in-repo case sets, so that a set added to eval/cases does not change the size
# of the stores built from them.
STORE_SETS = ("data-platform", "dev", "firmware", "game-client")


def eval_memories(per_set: int) -> tuple[Memories, dict[str, list[str]], list[dict[str, Any]]]:
    """The first ``per_set`` memories of each of ``STORE_SETS`` as (id, group, text), the requests
    a model wrote for each text (``eval/applies-when``), and the sets themselves."""
    memories: list[tuple[str, str, str]] = []
    table: dict[str, list[str]] = {}
    sets = []
    for path in (EVAL / "cases" / f"{name}.json" for name in STORE_SETS):
        data = json.loads(path.read_text("utf-8"))
        written = json.loads((EVAL / "applies-when" / path.name).read_text("utf-8"))
        sets.append(data)
        for n, memory in enumerate(data["memories"][:per_set]):
            mem_id = f"mem-{path.stem[:4]}{n:03d}-orig00"
            memories.append((mem_id, memory["group"], memory["text"]))
            if written.get(memory["key"]):
                table[memory["text"]] = list(written[memory["key"]])
    return memories, table, sets


def cli(paths: DataPaths, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """``memself ARGS`` as its own process on this data directory."""
    full = dict(os.environ, MEMSELF_HOME=str(paths.root), **(env or {}))
    return subprocess.Popen(
        [sys.executable, "-m", "memself", *args],
        env=full,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run_cli(paths: DataPaths, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    proc = cli(paths, *args, env=env)
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err


def records(paths: DataPaths) -> dict[str, dict[str, Any]]:
    out = {}
    for group in ("rule", "project"):
        for line in paths.group_file(group).read_text("utf-8").splitlines():
            if line.strip():
                raw = json.loads(line)
                out[raw["id"]] = raw
    return out


Responder = Callable[[dict[str, Any]], Reply]
