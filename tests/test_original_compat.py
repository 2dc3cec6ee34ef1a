"""A store written by the original Node plugin loads unchanged; rewriting drops observations and clamps."""

from __future__ import annotations

import shutil
from pathlib import Path

from memself.config import load_config
from memself.maintenance import run_daily_maintenance
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from memself.store.workspaces import workspace_of
from tests.support.helpers import T0
from tests.support.original_reader import original_reads

FIXTURE = Path(__file__).parent / "fixtures" / "original-store"


def _copy_fixture() -> DataPaths:
    paths = DataPaths.default()
    shutil.copytree(FIXTURE, paths.root)
    return paths


def test_original_files_load_unchanged() -> None:
    paths = _copy_fixture()
    before = {p.name: p.read_bytes() for p in paths.root.iterdir()}
    store = MemoryStore(paths)
    rules = store.read_group("rule")
    assert [m.id for m in rules][:2] == ["mem-mtfz46ql-w0i5wm", "mem-mtg0a1b2-k3l4m5"]
    assert rules[0].confidence == 1.15  # kept as stored until the daily check clamps it
    assert not rules[2].active
    projects = store.read_group("project")
    assert projects[1].category == "project"  # missing category falls back to the file's group
    assert all("observations" not in m.to_json() for m in rules + projects)
    assert load_config(paths).recallTopK == 3
    after = {p.name: p.read_bytes() for p in paths.root.iterdir()}
    assert after == before  # reading never rewrites


def test_rewrite_drops_observations_and_daily_check_clamps() -> None:
    paths = _copy_fixture()
    run_daily_maintenance(paths, 30, T0.replace(year=2026, month=11, day=27))
    text = paths.group_file("rule").read_text("utf-8")
    assert "observations" not in text
    store = MemoryStore(paths)
    first = store.get("mem-mtfz46ql-w0i5wm")
    assert first.confidence == 1 and first.evidence == "用户说：以后都用中文回答"
    assert store.get("mem-mth00001-pay001").text.startswith("支付页新流程")


def test_reinforcing_a_legacy_record_keeps_evidence_and_drops_observations() -> None:
    paths = _copy_fixture()
    store = MemoryStore(paths)
    store.reinforce("mem-mth00001-pay001", T0.replace(day=28))
    memory = store.get("mem-mth00001-pay001")
    assert memory.confidence == 0.7 and memory.evidence == "用户陈述"
    assert "observations" not in paths.group_file("project").read_text("utf-8")


def test_workspaces_change_nothing_for_an_original_store_and_scoped_writes_stay_readable(
    tmp_path: Path,
) -> None:
    from memself.hook.core import session_start
    from memself.hosts.base import EventKind, HookEvent

    paths = _copy_fixture()
    run_daily_maintenance(paths, 30, T0)  # today's, done as the first session of the day does
    before = {p.name: p.read_bytes() for p in paths.root.iterdir()}
    repo = tmp_path / "pay-service"
    (repo / ".git").mkdir(parents=True)

    def injected(workspace: str) -> str:
        event = HookEvent(
            "claude", EventKind.SESSION_START, "SessionStart", "s", "", "", "", False, workspace
        )
        return session_start(event, load_config(paths), T0, paths, warm=False).context

    # Every memory the original wrote is global: a session in a repository sees exactly what a
    # session without one sees, and reading rewrote nothing.
    assert injected(str(repo)) == injected("")
    assert "回答一律使用中文" in injected(str(repo))
    assert {p.name: p.read_bytes() for p in paths.root.iterdir() if p.name in before} == before

    store = MemoryStore(paths)
    added = store.add(
        "这个仓库的灰度开关在 Apollo 的 pay.gray 命名空间", "project", T0, workspace=workspace_of(str(repo))
    )
    store.move("mem-mtg0a1b2-k3l4m5", workspace_of(str(repo)), T0)
    records = {r["id"]: r for r in original_reads(paths.group_file("project"))}
    records.update({r["id"]: r for r in original_reads(paths.group_file("rule"))})
    assert records[added.memory.id]["workspace"] == str(repo)
    assert records["mem-mtg0a1b2-k3l4m5"]["workspaceName"] == "pay-service"
    assert not any(
        "workspace" in r for i, r in records.items() if i not in (added.memory.id, "mem-mtg0a1b2-k3l4m5")
    )
    assert "改完代码不要自动" not in injected("")  # moved: only that repository sees it now
    assert "改完代码不要自动" in injected(str(repo))
