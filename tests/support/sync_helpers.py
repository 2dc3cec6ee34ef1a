"""Machines for the sync tests: each a data directory on local disk, one bare git repository
(real git) as the remote they share."""

from __future__ import annotations

import json
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from memself.store.records import GROUPS
from memself.sync import canonical
from memself.sync.run import SyncResult, init, sync

T0 = datetime(2026, 11, 2, 9, 0, tzinfo=timezone.utc)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def bare_repo(path: Path) -> Path:
    subprocess.run(["git", "init", "-q", "--bare", str(path)], check=True)
    return path


class Machine:
    def __init__(self, root: Path, remote: Path) -> None:
        self.paths = DataPaths(root)
        self.store = MemoryStore(self.paths)
        self.remote = remote

    def init(self) -> None:
        init(self.paths, str(self.remote))

    def sync(self, minutes: float) -> SyncResult:
        return sync(self.paths, at(minutes))

    def add(self, text: str, minutes: float, group: str = "rule") -> str:
        return self.store.add(text, group, at(minutes)).memory.id

    def snapshot(self) -> canonical.Snapshot:
        return canonical.from_store(
            {g: self.store.load_group(g).memories for g in GROUPS}, self.store.load_trash().entries
        )

    def texts(self) -> dict[str, str]:
        return {m.id: m.text for m in self.store.all()}


def remote_names(remote: Path) -> list[str]:
    out = subprocess.run(
        ["git", "-C", str(remote), "ls-tree", "-r", "--name-only", "main"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return sorted(out.split())


def remote_file(remote: Path, name: str) -> str:
    return subprocess.run(
        ["git", "-C", str(remote), "show", f"main:{name}"], check=True, capture_output=True, text=True
    ).stdout


def strict_lines(path: Path) -> list[dict]:
    """Every line of a file, each of which must be a JSON object (no torn or bad line)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
