"""``memself sync``: real git, a bare repository on local disk as the remote, several data
directories as machines."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from memself.sync.gitrepo import FILES, SyncUnreachable
from memself.sync.merge import CONFLICT_REASON
from memself.sync.run import pending
from tests.support.cli import memself
from tests.support.original_reader import original_reads
from tests.support.sync_helpers import Machine, at, bare_repo, remote_file, remote_names, strict_lines


@pytest.fixture
def remote(tmp_path):
    return bare_repo(tmp_path / "memories.git")


@pytest.fixture
def machines(tmp_path, remote):
    out = [Machine(tmp_path / name, remote) for name in ("a", "b", "c")]
    for machine in out:
        machine.init()
    return out


def test_secrets_and_runtime_files_never_travel(tmp_path, remote):
    a = Machine(tmp_path / "a", remote)
    a.add("提交信息一律使用英文书写", 0)
    a.add("这个项目的测试用 pytest 运行", 1, group="project")
    gone = a.add("临时记忆将被删除掉的那一条", 2)
    a.store.delete([gone], at(3))
    root = a.paths.root
    (root / "side-secret.json").write_text('{"apiKey": "sk-SECRET-never-travels"}')
    (root / "session-secret").write_text("ab" * 32 + "\n")
    (root / "config.json").write_text('{"sideApiBase": "https://example.invalid"}')
    (root / "memself.log").write_text("sk-SECRET-never-travels\n")
    (root / "index").mkdir()
    (root / "index" / "vectors.bin").write_bytes(b"\0" * 64)
    a.init()
    a.sync(4)
    assert remote_names(remote) == sorted(FILES)
    everything = "".join(remote_file(remote, name) for name in FILES)
    assert "sk-SECRET" not in everything and "ab" * 32 not in everything
    assert "提交信息一律使用英文书写" in remote_file(remote, "rule.jsonl")
    assert "pytest" in remote_file(remote, "project.jsonl")
    assert gone in remote_file(remote, "trash.jsonl")


def test_canonical_files_sorted_by_id_and_readable_by_the_original(tmp_path, remote, machines):
    a = machines[0]
    ids = [a.add(f"第 {i} 条规则：保持函数短小清楚", i) for i in range(5)]
    a.store.reinforce(ids[3], at(10))
    a.sync(11)
    lines = [line for line in remote_file(remote, "rule.jsonl").splitlines() if line]
    assert [line.split('"id":"')[1].split('"')[0] for line in lines] == sorted(ids)
    copy = tmp_path / "rule.jsonl"
    copy.write_text(remote_file(remote, "rule.jsonl"), "utf-8")
    assert len(original_reads(copy)) == 5


def test_three_machines_converge_in_any_sync_order(machines):
    a, b, c = machines
    x = a.add("所有 shell 脚本开头写 set -euo pipefail", 0)
    a.sync(1)
    b.sync(2)
    c.sync(3)
    b.add("数据库迁移必须可以回滚", 4)
    c.add("接口返回的时间一律用 UTC", 5, group="project")
    a.store.replace(x, "所有 bash 脚本开头写 set -euo pipefail", at(6))
    c.sync(7)
    a.sync(8)
    d = b.add("日志里不要打印用户的手机号", 9)
    b.store.delete([d], at(10))
    b.sync(11)
    c.sync(12)
    a.sync(13)
    b.sync(14)
    first = a.snapshot()
    for other in (b, c):
        snap = other.snapshot()
        assert snap.memories == first.memories
        assert snap.trash == first.trash
    texts = sorted(r["text"] for r in first.memories.values())
    assert texts == sorted(
        ["所有 bash 脚本开头写 set -euo pipefail", "数据库迁移必须可以回滚", "接口返回的时间一律用 UTC"]
    )
    assert [r["id"] for r in first.trash.values()] == [d]


def test_an_edit_on_each_side_keeps_both_texts_newer_wins_other_restorable(machines):
    a, b, _ = machines
    x = a.add("代码评审至少要一个人通过", 0)
    a.sync(1)
    b.sync(2)
    a.store.replace(x, "代码评审至少要两个人通过", at(3))
    b.store.replace(x, "代码评审至少要三个人通过", at(4))
    a.sync(5)
    result = b.sync(6)
    assert [mem_id for mem_id, _ in result.report.conflicts] == [x]
    a.sync(7)
    for machine in (a, b):
        assert machine.texts()[x] == "代码评审至少要三个人通过"
        trashed = [e for e in machine.store.trash_entries() if e.reason == CONFLICT_REASON]
        assert [e.memory.text for e in trashed] == ["代码评审至少要两个人通过"]
    loser = result.report.conflicts[0][1]
    restored = a.store.restore(loser, at(8))
    assert restored.text == "代码评审至少要两个人通过"
    a.sync(9)
    b.sync(10)
    assert sorted(b.texts().values()) == ["代码评审至少要三个人通过", "代码评审至少要两个人通过"]


def test_confidence_from_the_side_with_the_newer_update_and_latest_last_seen(machines):
    a, b, _ = machines
    x = a.add("变量命名用完整的英文单词", 0)
    a.sync(1)
    b.sync(2)
    one_day, two_days = 24 * 60, 2 * 24 * 60
    a.store.reinforce(x, at(one_day))  # +0.1 a day later
    b.store.reward_recall([x], at(two_days))  # +0.05, later still
    a.sync(two_days + 1)
    b.sync(two_days + 2)
    a.sync(two_days + 3)
    mem_a, mem_b = a.store.get(x), b.store.get(x)
    assert mem_a is not None and mem_b is not None
    assert mem_a.confidence == mem_b.confidence == pytest.approx(0.55)  # b's, the newer update
    assert mem_a.lastSeen == mem_b.lastSeen == "2026-11-04T09:00:00.000Z"


def test_delete_on_one_side_and_edit_on_the_other_keeps_the_memory(machines):
    a, b, _ = machines
    x = a.add("发布前先跑完整的回归测试", 0)
    a.sync(1)
    b.sync(2)
    a.store.delete([x], at(3))
    b.store.replace(x, "发布前先跑完整的回归测试和冒烟测试", at(4))
    a.sync(5)
    result = b.sync(6)
    assert result.report.kept_edited == [x]
    a.sync(7)
    for machine in (a, b):
        assert machine.texts() == {x: "发布前先跑完整的回归测试和冒烟测试"}
        assert [e.memory.id for e in machine.store.trash_entries()] == []


def test_delete_on_one_side_and_only_a_reward_on_the_other_deletes(machines):
    a, b, _ = machines
    x = a.add("错误信息要写清楚下一步怎么做", 0)
    a.sync(1)
    b.sync(2)
    a.store.delete([x], at(3))
    b.store.reward_recall([x], at(24 * 60))
    a.sync(24 * 60 + 1)
    result = b.sync(24 * 60 + 2)
    assert result.report.removed == [x]
    assert b.texts() == {}
    assert [e.memory.id for e in b.store.trash_entries()] == [x]


def test_memories_only_on_one_side_are_added(tmp_path, remote):
    a, b = Machine(tmp_path / "a", remote), Machine(tmp_path / "b", remote)
    x = a.add("注释解释为什么而不是做了什么", 0)
    y = b.add("每个函数都要写类型标注", 1, group="project")
    a.init()
    b.init()
    a.sync(2)
    result = b.sync(3)
    assert result.report.added == [x]
    a.sync(4)
    assert set(a.texts()) == set(b.texts()) == {x, y}


def test_a_hand_edited_invalid_line_in_the_remote_is_quarantined_not_lost(tmp_path, remote, machines):
    a, b, _ = machines
    a.add("缩进统一使用四个空格", 0)
    a.sync(1)
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "-b", "main", str(remote), str(clone)], check=True)
    bad = '{"id":"mem-hand-edit","text":12,"confidence":0.5'
    with open(clone / "rule.jsonl", "a", encoding="utf-8") as handle:
        handle.write(bad + "\n")
    git = ["git", "-C", str(clone), "-c", "user.name=x", "-c", "user.email=x@x"]
    subprocess.run([*git, "commit", "-qam", "hand edit"], check=True)
    subprocess.run([*git, "push", "-q", "origin", "HEAD:main"], check=True)
    result = b.sync(2)
    assert result.quarantined == 1
    kept = strict_lines(b.paths.sync_dir / "quarantine.jsonl")
    assert kept == [{"file": "rule.jsonl", "line": bad}]
    assert [m.text for m in b.store.all()] == ["缩进统一使用四个空格"]
    assert b.store.quarantined() == []  # never written into the store's own files
    assert bad not in remote_file(remote, "rule.jsonl")  # the remote is clean again
    assert b.sync(3).quarantined == 0


def test_offline_sync_fails_in_chinese_local_writes_go_on_next_sync_catches_up(tmp_path, remote, machines):
    a, b, _ = machines
    env = {**os.environ, "MEMSELF_HOME": str(a.paths.root)}
    away = tmp_path / "away.git"
    shutil.move(str(remote), str(away))
    x = a.add("离线时写下的记忆也不能丢", 0)
    done = memself("sync", env=env)
    assert done.returncode == 1
    assert "无法连接同步仓库" in done.stderr and "下次同步时会补上" in done.stderr
    with pytest.raises(SyncUnreachable):
        a.sync(1)
    assert a.texts() == {x: "离线时写下的记忆也不能丢"}
    assert pending(a.paths).added == 1
    status = memself("sync", "status", env=env)
    assert status.returncode == 0, status.stderr
    assert "等待推送：新增 1 条" in status.stdout and "上次尝试失败" in status.stdout
    shutil.move(str(away), str(remote))
    done = memself("sync", env=env)
    assert done.returncode == 0, done.stderr
    assert "同步完成" in done.stdout
    assert "没有等待推送的本机改动" in memself("sync", "status", env=env).stdout
    b.sync(2)
    assert b.texts() == {x: "离线时写下的记忆也不能丢"}


def test_a_rejected_push_is_retried_after_fetching_again(machines, monkeypatch):
    a, b, _ = machines
    a.sync(0)
    b.sync(0)
    b.add("合并请求的标题写清楚改了什么", 1)
    a_id = a.add("每次提交只做一件事", 2)
    from memself.sync import gitrepo

    real_fetch = gitrepo.Repo.fetch
    calls = []

    def fetch_then_a_pushes(self):
        real_fetch(self)
        calls.append(self.path)
        if len(calls) == 1:
            a.sync(3)  # the remote moves on between b's fetch and b's push

    monkeypatch.setattr(gitrepo.Repo, "fetch", fetch_then_a_pushes)
    result = b.sync(4)
    monkeypatch.undo()
    assert result.rounds == 2 and result.pushed
    a.sync(5)
    assert a.snapshot().memories == b.snapshot().memories
    assert a_id in b.texts()


def test_sync_without_init_says_what_to_do():
    done = memself("sync")
    assert done.returncode == 1
    assert "memself sync init" in done.stderr


def test_git_variables_pointing_elsewhere_do_not_redirect_the_sync(tmp_path, remote, machines, monkeypatch):
    other = tmp_path / "other"
    subprocess.run(["git", "init", "-q", str(other)], check=True)
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(other))
    a = machines[0]
    a.add("环境变量里的 GIT_DIR 不能改变同步的仓库", 0)
    a.sync(1)
    monkeypatch.delenv("GIT_DIR")
    monkeypatch.delenv("GIT_WORK_TREE")
    assert "GIT_DIR" in remote_file(remote, "rule.jsonl")
    assert subprocess.run(["git", "-C", str(other), "rev-parse", "HEAD"], capture_output=True).returncode != 0


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_random_edits_and_sync_orders_converge_and_lose_no_memory(machines, seed):
    import random

    rng = random.Random(seed)
    created: set[str] = set()
    minute = 0
    for step in range(40):
        minute += 7
        machine = rng.choice(machines)
        live = [m.id for m in machine.store.all()]
        action = rng.choice(["add", "add", "replace", "delete", "reinforce", "restore", "sync", "sync"])
        if action == "add" or (not live and action in ("replace", "delete", "reinforce")):
            created.add(
                machine.add(f"第 {step} 步写下的记忆，种子 {seed}", minute, rng.choice(["rule", "project"]))
            )
        elif action == "replace":
            machine.store.replace(rng.choice(live), f"第 {step} 步改写的记忆，种子 {seed}", at(minute))
        elif action == "delete":
            machine.store.delete([rng.choice(live)], at(minute))
        elif action == "reinforce":
            machine.store.reinforce(rng.choice(live), at(minute))
        elif action == "restore":
            trashed = [e.memory.id for e in machine.store.trash_entries() if e.memory.id not in live]
            if trashed:
                machine.store.restore(rng.choice(trashed), at(minute))
        else:
            machine.sync(minute)
    for _ in range(2):
        for machine in machines:
            minute += 1
            machine.sync(minute)
    first = machines[0].snapshot()
    for other in machines[1:]:
        assert other.snapshot().memories == first.memories
        assert other.snapshot().trash == first.trash
    for machine in machines:
        assert machine.store.quarantined() == []
        known = {m.id for m in machine.store.all()} | {e.memory.id for e in machine.store.trash_entries()}
        assert created <= known  # every memory is live or in the trash, never gone
