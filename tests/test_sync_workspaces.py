"""A workspace's memories follow its repository to another machine, whatever its path there."""

from __future__ import annotations

import subprocess

import pytest

from memself.store.workspaces import workspace_of
from memself.sync.workspaces import WorkspaceMap, normalise_url
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
    b.sync(2)
    unseen = b.store.get(mem_id)
    assert unseen is not None and unseen.workspace not in ("", there.key)  # injected nowhere yet
    known = WorkspaceMap(b.paths)
    known.learn(there.key)  # a session started in b's clone
    known.save()
    b.sync(3)
    landed = b.store.get(mem_id)
    assert landed is not None and landed.workspace == there.key
    assert not b.sync(4).pushed and not a.sync(5).pushed  # the same in the synced form: no ping-pong
    mine = a.store.get(mem_id)
    assert mine is not None and mine.workspace == here.key
    b.store.replace(mem_id, "这个仓库的接口统一返回 JSON 格式", at(6))
    b.sync(7)
    a.sync(8)
    mine = a.store.get(mem_id)
    assert mine is not None and mine.workspace == here.key and mine.text.endswith("JSON 格式")
