"""``memself doctor`` and ``memself engine status`` show the last sync (time, result) and how
many changes wait to be synced, read from the state ``memself sync`` keeps. A real bare git
repository on disk as the remote, the real command line."""

from __future__ import annotations

import shutil
from pathlib import Path

from memself.doctor import check_sync
from memself.paths import DataPaths
from memself.sync.gitrepo import SyncUnreachable
from tests.support.cli import memself
from tests.support.sync_helpers import Machine, bare_repo

RULE = "回答问题时一律使用中文"
FACT = "支付服务本地调试端口是 8081"


def test_nothing_is_said_about_sync_until_it_is_set_up() -> None:
    paths = DataPaths.default()
    paths.ensure()
    assert check_sync(paths) is None
    assert "同步" not in memself("engine", "status").stdout


def test_the_last_sync_and_the_waiting_changes_are_shown(tmp_path: Path) -> None:
    paths = DataPaths.default()
    machine = Machine(paths.root, bare_repo(tmp_path / "remote.git"))
    machine.init()
    machine.add(RULE, 1)
    machine.sync(2)
    check = check_sync(paths)
    assert check is not None and check.ok is True
    assert "上次同步 2026-11-02T09:02:00" in check.summary and "没有等待同步的本机改动" in check.summary
    machine.add(FACT, 3, "project")
    check = check_sync(paths)
    assert check is not None and "等待同步 1 处改动（新增 1 条" in check.summary
    assert "memself sync" in check.fix
    status = memself("engine", "status")
    assert status.returncode == 0, status.stderr
    assert "  同步      上次同步 2026-11-02T09:02:00" in status.stdout
    assert "  同步      等待同步 1 处改动（新增 1 条" in status.stdout
    doctor = memself("doctor")
    assert "同步：" in doctor.stdout and "等待同步 1 处改动" in doctor.stdout


def test_a_failed_sync_is_shown_with_its_reason(tmp_path: Path) -> None:
    paths = DataPaths.default()
    remote = bare_repo(tmp_path / "remote.git")
    machine = Machine(paths.root, remote)
    machine.init()
    machine.add(RULE, 1)
    machine.sync(2)
    shutil.rmtree(remote)
    try:
        machine.sync(5)
    except SyncUnreachable:
        pass
    else:
        raise AssertionError("a sync to a removed remote must fail")
    check = check_sync(paths)
    assert check is not None and check.ok is None
    assert "上次同步 2026-11-02T09:02:00" in check.summary
    assert "上次尝试 2026-11-02T09:05:00.000Z 失败" in check.summary
    assert "检查网络和同步仓库地址" in check.fix
    assert "失败" in memself("engine", "status").stdout
