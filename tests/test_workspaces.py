"""Which workspace a directory belongs to, and how records carry it."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path

import pytest

from memself.store.records import Memory
from memself.store.workspaces import Workspace, workspace_for_key, workspace_of

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=timezone.utc)


def test_a_subdirectory_of_a_repository_belongs_to_its_root(tmp_path: Path) -> None:
    repo = tmp_path / "pay-service"
    (repo / ".git").mkdir(parents=True)
    deep = repo / "src" / "main" / "java"
    deep.mkdir(parents=True)
    assert workspace_of(str(deep)) == Workspace(str(repo), "pay-service")
    assert workspace_of(str(repo)) == Workspace(str(repo), "pay-service")


def test_a_directory_outside_any_repository_is_its_own_workspace(tmp_path: Path) -> None:
    plain = tmp_path / "notes"
    plain.mkdir()
    assert workspace_of(str(plain)) == Workspace(str(plain), "notes")


def test_a_directory_that_does_not_exist_here_still_names_a_workspace() -> None:
    # Recorded payloads and other machines' paths: no filesystem needed to name them.
    assert workspace_of("/home/dev/project/") == Workspace("/home/dev/project", "project")


@pytest.mark.parametrize("directory", ["", "relative/dir", "/"])
def test_no_workspace_for_an_empty_relative_or_root_directory(directory: str) -> None:
    assert workspace_of(directory) is None


def test_a_linked_worktree_belongs_to_its_main_repository(tmp_path: Path) -> None:
    main = tmp_path / "app"
    (main / ".git" / "worktrees" / "feature").mkdir(parents=True)
    linked = tmp_path / "app-feature"
    linked.mkdir()
    (linked / ".git").write_text(f"gitdir: {main / '.git' / 'worktrees' / 'feature'}\n", encoding="utf-8")
    # As git leaves it: the administrative directory points back at the worktree's .git file.
    (main / ".git" / "worktrees" / "feature" / "gitdir").write_text(f"{linked / '.git'}\n", encoding="utf-8")
    assert workspace_of(str(linked / "src")) == Workspace(str(main), "app")


def test_a_submodule_is_a_repository_of_its_own(tmp_path: Path) -> None:
    outer = tmp_path / "outer"
    (outer / ".git" / "modules" / "lib").mkdir(parents=True)
    sub = outer / "lib"
    sub.mkdir()
    pointer = os.path.join(os.pardir, ".git", "modules", "lib")  # relative, as git writes it
    (sub / ".git").write_text(f"gitdir: {pointer}\n", encoding="utf-8")
    assert workspace_of(str(sub)) == Workspace(str(sub), "lib")


def test_an_unreadable_or_foreign_git_file_is_not_a_repository(tmp_path: Path) -> None:
    outer = tmp_path / "outer"
    (outer / ".git").mkdir(parents=True)
    odd = outer / "odd"
    odd.mkdir()
    (odd / ".git").write_text("not a pointer", encoding="utf-8")
    assert workspace_of(str(odd)) == Workspace(str(outer), "outer")


def test_records_keep_their_workspace_and_stay_the_originals_when_global() -> None:
    scoped = Memory.create("支付页灰度开关是 pay_new_flow", "project", NOW, workspace=workspace_of("/w/pay"))
    raw = scoped.to_json()
    assert (raw["workspace"], raw["workspaceName"]) == ("/w/pay", "pay")
    again = Memory.from_json(json.loads(json.dumps(raw)), "project")
    assert again is not None and again.to_json() == raw
    assert again.visible_in("/w/pay") and not again.visible_in("/w/other") and not again.visible_in("")

    plain = Memory.create("回答一律使用简体中文", "rule", NOW)
    assert "workspace" not in plain.to_json() and "workspaceName" not in plain.to_json()
    assert plain.visible_in("/w/pay") and plain.visible_in("")


@pytest.mark.parametrize("value", [17, "relative/path", "", ["/w/pay"]])
def test_an_unusable_workspace_value_counts_as_global_and_is_written_back_as_found(value: object) -> None:
    raw = {"id": "mem-1", "text": "支付页灰度开关是 pay_new_flow", "confidence": 0.5, "workspace": value}
    memory = Memory.from_json(raw, "project")
    assert memory is not None and memory.workspace == ""
    assert memory.visible_in("/w/anything")
    assert memory.to_json()["workspace"] == value


def test_a_workspace_key_is_normalised_and_named_from_its_path() -> None:
    assert workspace_for_key("/w/pay/") == Workspace("/w/pay", "pay")
    assert workspace_for_key("pay") is None
    raw = {"id": "mem-1", "text": "支付页灰度开关是 pay_new_flow", "confidence": 0.5, "workspace": "/w/pay/"}
    memory = Memory.from_json(raw, "project")
    assert memory is not None and (memory.workspace, memory.workspaceName) == ("/w/pay", "pay")


def test_the_walk_runs_no_program(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("no program may run")

    monkeypatch.setattr(os, "execv", refuse)
    monkeypatch.setattr("subprocess.Popen", refuse)
    (tmp_path / "r" / ".git").mkdir(parents=True)
    assert workspace_of(str(tmp_path / "r" / "x")) == Workspace(str(tmp_path / "r"), "r")


def test_a_recall_pool_shows_each_workspace_the_global_memories_and_its_own() -> None:
    from memself.recall.pool import RecallPool

    pay, ops = workspace_of("/w/pay-service"), workspace_of("/w/ops-portal")
    memories = [
        Memory.create("回答一律使用简体中文", "rule", NOW),
        Memory.create("灰度开关是 pay_new_flow", "project", NOW, workspace=pay),
        Memory.create("灰度开关在 Django admin 的 FeatureFlag 表", "project", NOW, workspace=ops),
        Memory.create("这个仓库用 Maven，不要用 Gradle", "rule", NOW, workspace=pay),
    ]
    pool = RecallPool(memories)
    assert pool.members("project", "/w/pay-service").tolist() == [1]
    assert pool.members("project", "/w/ops-portal").tolist() == [2]
    assert pool.members("rule", "/w/pay-service").tolist() == [0, 3]
    assert pool.members("rule", "/w/ops-portal").tolist() == [0]
    assert pool.members(None, "").tolist() == [0]  # no workspace: the global memories only
    assert pool.members(None, "/w/unknown").tolist() == [0]
    assert pool.members(None).tolist() == [0, 1, 2, 3]  # unscoped: every memory
