"""A group file, the trash or config.json that is a symlink (a user's sync folder) is written
through to its target, atomically in the target's folder; the link itself is never replaced."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memself.config import set_config_value
from memself.errors import MemselfError
from memself.store.memory_store import MemoryStore
from tests.support.helpers import T0, make_store


@pytest.fixture
def store() -> MemoryStore:
    return make_store()


def _link(store: MemoryStore, name: str, sync: Path) -> Path:
    sync.mkdir(exist_ok=True)
    target = sync / name
    link = store.paths.root / name
    if link.exists():
        target.write_bytes(link.read_bytes())
        link.unlink()
    elif name.endswith(".jsonl"):
        target.write_bytes(b"")
    link.symlink_to(target)
    return target


def test_group_trash_and_config_links_are_written_through(store: MemoryStore, tmp_path: Path) -> None:
    sync = tmp_path / "sync"
    targets = {
        name: _link(store, name, sync)
        for name in ("rule.jsonl", "project.jsonl", "trash.jsonl", "config.json")
    }
    kept = store.create("回答一律使用中文", "rule", T0)
    gone = store.create("支付页灰度开关是 pay_new_flow", "project", T0)
    store.delete([gone.id], T0)
    set_config_value(store.paths, "recallTopK", "5")
    for name, target in targets.items():
        link = store.paths.root / name
        assert link.is_symlink() and Path(os.readlink(link)) == target, name
    assert kept.id in targets["rule.jsonl"].read_text("utf-8")
    assert gone.id in targets["trash.jsonl"].read_text("utf-8")
    assert gone.id not in targets["project.jsonl"].read_text("utf-8")
    assert '"recallTopK": 5' in targets["config.json"].read_text("utf-8")
    store.restore(gone.id, T0)
    assert gone.id in targets["project.jsonl"].read_text("utf-8")
    assert store.paths.group_file("project").is_symlink()
    # Nothing was staged beside the links or left behind in the target folder.
    leftovers = [p.name for d in (store.paths.root, sync) for p in d.iterdir() if ".tmp." in p.name]
    assert leftovers == []


def test_relative_link_and_link_chain(store: MemoryStore, tmp_path: Path) -> None:
    sync = store.paths.root / "sync"
    sync.mkdir()
    (sync / "real.jsonl").write_text("")
    (sync / "hop.jsonl").symlink_to("real.jsonl")
    store.paths.group_file("rule").symlink_to("sync/hop.jsonl")
    store.create("回答一律使用中文", "rule", T0)
    assert store.paths.group_file("rule").is_symlink() and (sync / "hop.jsonl").is_symlink()
    assert "回答一律使用中文" in (sync / "real.jsonl").read_text("utf-8")


_CHILD = """
from datetime import datetime, timezone
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from memself.errors import MemselfError
try:
    MemoryStore(DataPaths.default()).create("第二条规则内容", "rule", datetime.now(timezone.utc))
except MemselfError as exc:
    print("ERR", exc)
"""


def test_link_into_a_read_only_folder_is_refused_clearly(store: MemoryStore, tmp_path: Path) -> None:
    sync = tmp_path / "sync"
    target = _link(store, "rule.jsonl", sync)
    store.create("回答一律使用中文", "rule", T0)
    before = target.read_bytes()
    # A read-only bind mount is read-only even for root (mode bits are not).
    script = (
        f"mount --bind {sync} {sync} && mount -o remount,bind,ro {sync} && {sys.executable} -c '{_CHILD}'"
    )
    result = subprocess.run(
        ["unshare", "-m", "sh", "-c", script],
        capture_output=True,
        # The child prints in its console's encoding (GBK in the foreign-platform mode).
        encoding=os.environ.get("PYTHONIOENCODING") or "utf-8",
        timeout=60,
        env=os.environ.copy(),
    )
    assert "ERR" in result.stdout, result.stderr
    assert str(target) in result.stdout and "符号链接" in result.stdout
    assert store.paths.group_file("rule").is_symlink()
    assert target.read_bytes() == before


def test_write_atomic_through_a_link_keeps_the_link(tmp_path: Path) -> None:
    from memself.atomic import write_atomic

    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "f.json"
    target.write_text("old")
    link = tmp_path / "f.json"
    link.symlink_to(target)
    write_atomic(link, "new")
    assert link.is_symlink() and target.read_text() == "new"
    dangling = tmp_path / "d.json"
    dangling.symlink_to(tmp_path / "real" / "created.json")
    write_atomic(dangling, "made")
    assert dangling.is_symlink() and (tmp_path / "real" / "created.json").read_text() == "made"
    with pytest.raises(MemselfError, match="符号链接"):
        loop = tmp_path / "loop.json"
        loop.symlink_to(loop)
        write_atomic(loop, "x")
