"""A workspace's memories follow its repository to another machine, whatever its path there."""

from __future__ import annotations

import subprocess

import pytest

from memself.store.workspaces import workspace_of
from memself.sync.workspaces import WorkspaceMap, identity, normalise_url
from tests.support.sync_helpers import Machine, at, bare_repo, remote_file


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("git@github.com:me/proj.git", "github.com/me/proj"),
        ("https://github.com/me/proj", "github.com/me/proj"),
        ("https://user@GitHub.com/me/proj.git/", "github.com/me/proj"),
        ("ssh://git@github.com:22/me/proj.git", "github.com/me/proj"),
        ("/srv/git/proj.git", None),
        ("", None),
    ],
)
def test_repository_identity_from_the_origin_url(url, expected):
    assert normalise_url(url) == expected


def _clone_like(root, url):
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "remote", "add", "origin", url], check=True)
    return workspace_of(str(root))


def _lands_once_the_clone_is_known(a, b, mem_id, there):
    """Synced to machine b, memory ``mem_id`` of a's workspace is injected nowhere until a session
    starts in b's clone at ``there``; then it belongs there, and neither machine pushes again."""
    b.sync(2)
    unseen = b.store.get(mem_id)
    assert unseen is not None and unseen.workspace not in ("", there)  # injected nowhere yet
    known = WorkspaceMap(b.paths)
    known.learn(there)  # a session started in b's clone
    known.save()
    b.sync(3)
    landed = b.store.get(mem_id)
    assert landed is not None and landed.workspace == there
    assert not b.sync(4).pushed and not a.sync(5).pushed  # the same in the synced form: no ping-pong


def test_workspace_memories_land_in_the_same_repository_at_another_path(tmp_path):
    remote = bare_repo(tmp_path / "memories.git")
    a, b = Machine(tmp_path / "a", remote), Machine(tmp_path / "b", remote)
    a.init()
    b.init()
    here = _clone_like(tmp_path / "home-a" / "proj", "git@github.com:me/proj.git")
    there = _clone_like(tmp_path / "elsewhere" / "code" / "proj", "https://github.com/me/proj")
    assert here is not None and there is not None and here.key != there.key
    mem_id = a.store.add("这个仓库的接口统一返回 JSON", "project", at(0), workspace=here).memory.id
    a.sync(1)
    assert '"workspace":"repo:github.com/me/proj"' in remote_file(remote, "project.jsonl")
    assert str(tmp_path) not in remote_file(remote, "project.jsonl")
    _lands_once_the_clone_is_known(a, b, mem_id, there.key)
    mine = a.store.get(mem_id)
    assert mine is not None and mine.workspace == here.key
    b.store.replace(mem_id, "这个仓库的接口统一返回 JSON 格式", at(6))
    b.sync(7)
    a.sync(8)
    mine = a.store.get(mem_id)
    assert mine is not None and mine.workspace == here.key and mine.text.endswith("JSON 格式")


# --- a repository without a remote: its first commit is its identity --------------------------


def _git(root, *args, date="2024-01-01T00:00:00"):
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "GIT_AUTHOR_DATE": date,
        "GIT_COMMITTER_DATE": date,
        "PATH": __import__("os").environ["PATH"],
        "HOME": str(root),
    }
    done = subprocess.run(
        ["git", "-C", str(root), *args], check=True, capture_output=True, text=True, env=env
    )
    return done.stdout.strip()


def _repo_without_remote(root):
    root.mkdir(parents=True)
    _git(root, "init", "-q", "-b", "main")
    (root / "README").write_text("proj\n", encoding="utf-8")
    _git(root, "add", "README")
    _git(root, "commit", "-q", "-m", "first")
    return _git(root, "rev-parse", "HEAD")


def test_two_clones_of_a_repository_without_remote_are_one_workspace(tmp_path):
    first = _repo_without_remote(tmp_path / "src" / "proj")
    here_root, there_root = tmp_path / "home-a" / "proj", tmp_path / "elsewhere" / "code" / "proj"
    subprocess.run(["git", "clone", "-q", str(tmp_path / "src" / "proj"), str(here_root)], check=True)
    subprocess.run(["git", "clone", "-q", str(tmp_path / "src" / "proj"), str(there_root)], check=True)
    subprocess.run(
        ["git", "-C", str(here_root), "remote", "remove", "origin"], check=True
    )  # no remote at all
    here, there = workspace_of(str(here_root)), workspace_of(str(there_root))  # there: a local path only
    assert here is not None and there is not None
    assert identity(here.key) == identity(there.key) == f"root-commit/{first}"
    remote = bare_repo(tmp_path / "memories.git")
    a, b = Machine(tmp_path / "a", remote), Machine(tmp_path / "b", remote)
    a.init()
    b.init()
    mem_id = a.store.add("这个仓库的接口统一返回 JSON", "project", at(0), workspace=here).memory.id
    a.sync(1)
    shared = remote_file(remote, "project.jsonl")
    assert f'"workspace":"repo:root-commit/{first}"' in shared and str(tmp_path) not in shared
    _lands_once_the_clone_is_known(a, b, mem_id, there.key)


def test_the_oldest_root_commit_is_the_identity_and_an_empty_repository_has_none(tmp_path):
    root = tmp_path / "proj"
    newer = _repo_without_remote(root)
    _git(root, "checkout", "-q", "--orphan", "old", date="2010-01-01T00:00:00")
    _git(root, "commit", "-q", "-m", "older history", date="2010-01-01T00:00:00")
    older = _git(root, "rev-parse", "HEAD")
    _git(root, "checkout", "-q", "main")
    _git(root, "merge", "-q", "--allow-unrelated-histories", "-m", "join", "old", date="2025-01-01T00:00:00")
    roots = _git(root, "rev-list", "--max-parents=0", "HEAD").split()
    assert sorted(roots) == sorted([newer, older])
    assert identity(str(root)) == f"root-commit/{older}"
    empty = tmp_path / "empty"
    empty.mkdir()
    subprocess.run(["git", "init", "-q", str(empty)], check=True)
    assert identity(str(empty)) is None  # nothing to know it by: it keeps its path
