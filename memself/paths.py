"""Where memself keeps its files. One data directory, shared by every host and the original plugin."""

from __future__ import annotations

import os
from pathlib import Path

from memself.datadir import DEFAULT_DIR_NAME as DEFAULT_DIR_NAME
from memself.datadir import HOME_ENV as HOME_ENV
from memself.datadir import data_root_text

MODEL_CACHE_ENV = "MEMSELF_MODEL_CACHE"


def data_root() -> Path:
    """The data directory: ``$MEMSELF_HOME`` or ``~/.memory-self-evolution``."""
    return Path(data_root_text())


def model_cache_dir() -> Path:
    """Where memself keeps model folders, lexical tables and backgrounds, apart from the data
    directory (large, rebuildable, per machine): ``$MEMSELF_MODEL_CACHE`` or
    ``~/.cache/memself/models``."""
    override = os.environ.get(MODEL_CACHE_ENV, "").strip()
    if override:
        return Path(override).expanduser()
    return Path.home() / ".cache" / "memself" / "models"


class DataPaths:
    """Every file of the data directory, compatible with the original plugin's names.

    A plain class rather than a dataclass: the hook imports this module, and ``dataclasses``
    pulls in ``inspect`` and ``ast``, tens of milliseconds of a hook's budget.
    """

    __slots__ = ("root",)

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DataPaths) and other.root == self.root

    def __hash__(self) -> int:
        return hash(self.root)

    def __repr__(self) -> str:
        return f"DataPaths(root={self.root!r})"

    @classmethod
    def default(cls) -> DataPaths:
        return cls(data_root())

    def group_file(self, group: str) -> Path:
        return self.root / f"{group}.jsonl"

    @property
    def trash(self) -> Path:
        return self.root / "trash.jsonl"

    @property
    def config(self) -> Path:
        return self.root / "config.json"

    @property
    def decay_state(self) -> Path:
        return self.root / "decay-state.json"

    @property
    def html(self) -> Path:
        return self.root / "memories.html"

    @property
    def legacy_markdown(self) -> Path:
        return self.root / "memories.md"

    @property
    def lock_dir(self) -> Path:
        # Same name as the original's lock, so both plugins exclude each other while a user switches.
        return self.root / ".memory-write.lock"

    @property
    def side_dir(self) -> Path:
        return self.root / "side"

    @property
    def session_secret(self) -> Path:
        return self.root / "session-secret"

    @property
    def side_secret(self) -> Path:
        return self.root / "side-secret.json"

    @property
    def index_dir(self) -> Path:
        return self.root / "index"

    @property
    def legacy_embeddings(self) -> Path:
        return self.root / "embeddings.jsonl"

    @property
    def log_file(self) -> Path:
        return self.root / "memself.log"

    @property
    def verify_cases(self) -> Path:
        return self.root / "verify-cases.json"

    @property
    def torn_lines(self) -> Path:
        """Torn last lines of killed writers, moved aside byte for byte (``memself.store.torntail``)."""
        return self.root / "torn-lines.txt"

    @property
    def sync_dir(self) -> Path:
        """``memself sync``: its git working copy (``repo/``), state and quarantine."""
        return self.root / "sync"

    def ensure(self) -> Path:
        """Create the data directory (mode 0700) if missing and return it."""
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        return self.root
