"""A ``.git`` file is believed only as far as git would believe it.

A directory whose ``.git`` file says ``gitdir: <other>/.git/worktrees/x`` used to be taken for a
linked worktree of ``<other>`` (an archive or a package can carry such a file), and so got that
repository's rules at session start and its facts on recall. A linked worktree now counts as its
main repository only when its administrative directory exists and that directory's ``gitdir``
file points back at this very ``.git`` file, as ``git worktree add`` leaves them. Real git makes
the genuine worktrees and submodules; the crafted files are written by hand.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from memself.config import set_config_value
from memself.engine.client import call_engine, stop_engine
from memself.hosts import HOSTS
from memself.hosts.base import EventKind
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from memself.store.workspaces import Workspace, workspace_of
from tests.support.hookproc import hook_data, run_entry
from tests.support.judge_helpers import NOW

__all__ = ["hook_data"]  # the fixture, imported for pytest

GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
}


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "protocol.file.allow=always", "-c", "init.defaultBranch=main", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, **GIT_ENV},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def repository(path: Path) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q")
    (path / "README").write_text("x\n", encoding="utf-8")
    git(path, "add", "README")
    git(path, "commit", "-q", "-m", "first")
    return path


@pytest.fixture
def repos(tmp_path: Path) -> dict[str, Path]:
    """``other``: a real repository with a real linked worktree ``other-wt`` (admin dir
    ``other/.git/worktrees/other-wt``); ``outer``: a real repository with a real submodule
    ``lib``; ``evil``: a plain directory, next to them, for the crafted ``.git`` files."""
    base = tmp_path.resolve()
    other = repository(base / "other")
    git(other, "worktree", "add", "-q", str(base / "other-wt"))
    (base / "other-wt" / "src" / "deep").mkdir(parents=True)
    lib = repository(base / "lib-origin")
    outer = repository(base / "outer")
    git(outer, "submodule", "add", "-q", str(lib), "lib")
    (outer / "lib" / "pkg").mkdir()
    evil = base / "evil"
    (evil / "src" / "deep").mkdir(parents=True)
    return {"other": other, "wt": base / "other-wt", "outer": outer, "evil": evil}


def ws(path: Path) -> Workspace:
    return Workspace(str(path), path.name)


def test_a_real_linked_worktree_still_belongs_to_its_main_repository(repos: dict[str, Path]) -> None:
    assert (repos["wt"] / ".git").is_file()
    assert workspace_of(str(repos["wt"])) == ws(repos["other"])
    assert workspace_of(str(repos["wt"] / "src" / "deep")) == ws(repos["other"])


def test_a_real_submodule_is_still_a_repository_of_its_own(repos: dict[str, Path]) -> None:
    sub = repos["outer"] / "lib"
    assert (sub / ".git").is_file()
    assert "modules" in (sub / ".git").read_text(encoding="utf-8")
    assert workspace_of(str(sub)) == ws(sub)
    assert workspace_of(str(sub / "pkg")) == ws(sub)
    assert workspace_of(str(repos["outer"])) == ws(repos["outer"])


def crafted_pointers(repos: dict[str, Path]) -> dict[str, str]:
    """What a crafted ``.git`` file in ``evil`` may say, each naming ``other``'s worktrees."""
    other = repos["other"]
    admin = other / ".git" / "worktrees" / "other-wt"  # real, but it points back at other-wt
    up = os.pardir
    return {
        "missing, relative": os.path.join(up, "other", ".git", "worktrees", "x"),
        "missing, absolute": str(other / ".git" / "worktrees" / "x"),
        "real, not pointing back, relative": os.path.join(up, "other", ".git", "worktrees", admin.name),
        "real, not pointing back, absolute": str(admin),
        "dotted": str(other / ".git" / "worktrees" / os.pardir / "worktrees" / "other-wt"),
    }


CRAFTED = [
    "missing, relative",
    "missing, absolute",
    "real, not pointing back, relative",
    "real, not pointing back, absolute",
    "dotted",
]


@pytest.mark.parametrize("case", CRAFTED)
@pytest.mark.parametrize("start", [".", "src/deep"])
def test_a_crafted_git_file_does_not_open_another_workspace(
    repos: dict[str, Path], case: str, start: str
) -> None:
    evil = repos["evil"]
    (evil / ".git").write_text(f"gitdir: {crafted_pointers(repos)[case]}\n", encoding="utf-8")
    found = workspace_of(str(evil / start))
    assert found == ws(evil), found


def test_an_admin_dir_not_pointing_back_is_not_believed(repos: dict[str, Path]) -> None:
    other, evil = repos["other"], repos["evil"]
    for name, back in (("no-file", None), ("elsewhere", repos["wt"] / ".git"), ("dir", evil)):
        admin = other / ".git" / "worktrees" / name
        admin.mkdir()
        if back is not None:
            (admin / "gitdir").write_text(f"{back}\n", encoding="utf-8")
        (evil / ".git").write_text(f"gitdir: {admin}\n", encoding="utf-8")
        assert workspace_of(str(evil / "src")) == ws(evil), name
    # The same admin dir, once it points back at this .git file, is what git would accept.
    (other / ".git" / "worktrees" / "no-file" / "gitdir").write_text(f"{evil / '.git'}\n", encoding="utf-8")
    (evil / ".git").write_text(f"gitdir: {other / '.git' / 'worktrees' / 'no-file'}\n", encoding="utf-8")
    assert workspace_of(str(evil / "src")) == ws(other)


def test_relative_pointers_both_ways_are_accepted_when_they_agree(repos: dict[str, Path]) -> None:
    # What git writes with worktree.useRelativePaths: each side relative to its own directory.
    other, wt = repos["other"], repos["wt"]
    admin = other / ".git" / "worktrees" / "other-wt"
    (wt / ".git").write_text(f"gitdir: {os.path.relpath(admin, wt)}\n", encoding="utf-8")
    (admin / "gitdir").write_text(f"{os.path.relpath(wt / '.git', admin)}\n", encoding="utf-8")
    assert workspace_of(str(wt / "src" / "deep")) == ws(other)
    assert git(wt, "rev-parse", "--git-common-dir").strip() != ""  # git agrees it is a worktree
    (admin / "gitdir").write_text(f"{os.path.relpath(repos['evil'] / '.git', admin)}\n", encoding="utf-8")
    assert workspace_of(str(wt)) == ws(wt)


# --- the real hook: session start and recall -------------------------------------------------

OTHER_RULE = "改完代码后不要自动 git commit，除非我明确要求"
OTHER_FACT = "支付页新流程的灰度开关是 pay_new_flow，在配置中心 payment 命名空间下"
GLOBAL_RULE = "回答一律使用简体中文"
PROMPT = "支付页新流程的灰度开关叫什么"


@pytest.fixture
def real_engine(model_cache: Path, hook_data: DataPaths, repos: dict[str, Path]) -> Iterator[DataPaths]:
    paths = hook_data
    set_config_value(paths, "model", "multilingual-e5-small")
    for key, value in (("recallMinScore", "-1"), ("recallMinScoreProject", "-1"), ("recallMinMargin", "-1")):
        set_config_value(paths, key, value)
    os.environ.pop("MEMSELF_ENGINE_SERVICE", None)
    store = MemoryStore(paths)
    other = workspace_of(str(repos["other"]))
    store.create(GLOBAL_RULE, "rule", NOW)
    store.create(OTHER_RULE, "rule", NOW, workspace=other)
    store.create(OTHER_FACT, "project", NOW, workspace=other)
    yield paths
    stop_engine(paths)


def context(cwd: Path, kind: EventKind) -> str:
    adapter = HOSTS["claude"]
    payload = {
        "hook_event_name": adapter.EVENT_NAMES[kind],
        "session_id": "s-gitfile",
        "cwd": str(cwd),
    }
    if kind is EventKind.PROMPT_SUBMIT:
        payload["prompt"] = PROMPT
    proc = run_entry("claude", json.dumps(payload, ensure_ascii=False).encode(), timeout=120)
    assert proc.rc == 0
    answer = proc.answer()
    assert answer is not None
    return str(answer["hookSpecificOutput"]["additionalContext"])


def test_the_hook_gives_a_crafted_directory_nothing_of_the_other_repository(
    real_engine: DataPaths, repos: dict[str, Path]
) -> None:
    paths = real_engine
    warm = call_engine(paths, "recall", {"text": PROMPT, "now": NOW.isoformat()}, timeout_s=180)
    assert warm is not None
    evil = repos["evil"]
    # The genuine worktree gets its main repository's rule and fact: the check can fail.
    for start in (repos["wt"], repos["wt"] / "src" / "deep"):
        assert OTHER_RULE in context(start, EventKind.SESSION_START)
        assert OTHER_FACT in context(start, EventKind.PROMPT_SUBMIT)
    for case, pointer in crafted_pointers(repos).items():
        (evil / ".git").write_text(f"gitdir: {pointer}\n", encoding="utf-8")
        for start in (evil, evil / "src" / "deep"):
            session = context(start, EventKind.SESSION_START)
            assert GLOBAL_RULE in session, (case, start)
            assert OTHER_RULE not in session, (case, start)
            recalled = context(start, EventKind.PROMPT_SUBMIT)
            assert OTHER_FACT not in recalled and OTHER_RULE not in recalled, (case, start)
