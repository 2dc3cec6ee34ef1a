"""The memory CLI as a user runs it: real subprocesses, Chinese output, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.support.cli import memself


def test_rule_add_read_delete_trash_restore_round_trip() -> None:
    added = memself("rule", "add", "回答一律使用中文")
    assert added.returncode == 0 and "已新增规则：回答一律使用中文" in added.stdout
    records = json.loads(memself("read", "rule", "--json").stdout)
    assert len(records) == 1 and records[0]["confidence"] == 0.5
    assert records[0]["text"] == "回答一律使用中文" and records[0]["category"] == "rule"
    mem_id = records[0]["id"]
    deleted = memself("delete", mem_id)
    assert deleted.returncode == 0 and "已删除 1 条" in deleted.stdout
    assert json.loads(memself("read", "rule", "--json").stdout) == []
    trash = json.loads(memself("trash", "--json").stdout)
    assert [t["id"] for t in trash] == [mem_id] and trash[0]["deletedAt"]
    restored = memself("restore", mem_id)
    assert restored.returncode == 0 and "已恢复到 rule" in restored.stdout
    assert json.loads(memself("read", "rule", "--json").stdout)[0]["id"] == mem_id
    assert json.loads(memself("trash", "--json").stdout) == []


def test_list_counts_and_reports_corrupt_lines() -> None:
    memself("project", "add", "支付页新流程的灰度开关是 pay_new_flow")
    home = os.environ["MEMSELF_HOME"]
    with open(os.path.join(home, "project.jsonl"), "a", encoding="utf-8") as handle:
        handle.write("{broken\n")
    result = memself("list")
    assert "project 1 条" in result.stdout and "共 1 条" in result.stdout
    assert "第 2 行无法读取" in result.stderr
    assert json.loads(memself("list", "--json").stdout)["problems"][0]["line"] == 2


def test_errors_exit_1_with_one_clear_line() -> None:
    for args, message in [
        (("rule", "add", "短"), "6 到 400"),
        (("delete", "mem-nope"), "没有找到要删除的记忆"),
        (("restore", "mem-nope"), "回收站里没有"),
        (("config", "decayDays", "0"), "decayDays 需要正整数"),
        (("config", "nope", "1"), "未知配置项"),
    ]:
        result = memself(*args)
        assert result.returncode == 1, args
        assert result.stderr.strip().startswith("错误：") and message in result.stderr
        assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_config_show_set_json() -> None:
    assert "recallTopK 已设为 5" in memself("config", "recallTopK", "5").stdout
    shown = memself("config").stdout
    assert "recallTopK            = 5\n" in shown and "decayDays             = 30  (默认)" in shown
    assert json.loads(memself("config", "--json").stdout)["recallTopK"] == 5
    assert json.loads(memself("config", "recallTopK", "--json").stdout) == {"recallTopK": 5}


def test_open_writes_snapshot_without_browser() -> None:
    memself("rule", "add", "回答一律使用中文")
    result = memself("open", "--no-browser")
    assert result.returncode == 0
    html = open(os.path.join(os.environ["MEMSELF_HOME"], "memories.html"), encoding="utf-8").read()
    assert "回答一律使用中文" in html


def test_key_set_reads_stdin_binds_and_config_warns_on_a_new_base() -> None:
    home = os.environ["MEMSELF_HOME"]
    assert memself("config", "sideApiBase", "https://a.example/v1").returncode == 0
    done = subprocess.run(
        [sys.executable, "-m", "memself", "key", "set"],
        input="sk-cli-key\n",
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ.copy(),
    )
    assert done.returncode == 0 and "只会发往 https://a.example/v1" in done.stdout
    assert "sk-cli-key" not in done.stdout + done.stderr
    with open(os.path.join(home, "side-secret.json"), encoding="utf-8") as handle:
        assert json.load(handle) == {"apiKey": "sk-cli-key", "boundApiBase": "https://a.example/v1"}
    assert "绑定 https://a.example/v1" in memself("key", "status").stdout
    moved = memself("config", "sideApiBase", "https://b.example/v1")
    assert moved.returncode == 0 and "memself key set" in moved.stdout
    assert "与 sideApiBase 不同" in memself("key", "status").stdout
    empty = subprocess.run(
        [sys.executable, "-m", "memself", "key", "set"],
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ.copy(),
    )
    assert empty.returncode == 1 and "没有读到 apiKey" in empty.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "memself", "key", "set", "--base", "ftp://x"],
        input="sk\n",
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ.copy(),
    )
    assert bad.returncode == 1 and "http://" in bad.stderr
    moved_back = subprocess.run(
        [sys.executable, "-m", "memself", "key", "set", "--base", "https://b.example/v1"],
        input="sk-b\n",
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ.copy(),
    )
    assert moved_back.returncode == 0
    assert "绑定 https://b.example/v1" in memself("key", "status").stdout


def test_add_with_when_stores_and_read_shows_them() -> None:
    added = memself(
        "rule",
        "add",
        "所有存库的时间一律使用 UTC",
        "--when",
        "记一下快递员取件的时间点",
        "--when",
        "给订单表加个创建时间字段",
    )
    assert added.returncode == 0, added.stderr
    assert "适用场景：记一下快递员取件的时间点；给订单表加个创建时间字段" in added.stdout
    [record] = json.loads(memself("read", "rule", "--json").stdout)
    assert record["appliesWhen"] == ["记一下快递员取件的时间点", "给订单表加个创建时间字段"]
    shown = memself("read", "rule").stdout.split("\n")
    assert shown[1].startswith("1. 所有存库的时间一律使用 UTC（置信度 0.5，id mem-")
    assert shown[2] == "   适用场景：记一下快递员取件的时间点；给订单表加个创建时间字段"
    plain = memself("project", "add", "支付页新流程的灰度开关是 pay_new_flow")
    assert plain.returncode == 0 and "适用场景" not in plain.stdout
    assert "appliesWhen" not in json.loads(memself("read", "project", "--json").stdout)[0]


def test_add_with_bad_when_is_refused() -> None:
    from click.testing import CliRunner

    from memself.cli.app import main

    for whens, message in [
        (["x"], "2 到 80"),
        (["长" * 81], "2 到 80"),
        ([f"第 {i} 个请求" for i in range(5)], "最多 4 条"),
    ]:
        args = ["project", "add", "支付页新流程的灰度开关是 pay_new_flow"]
        for when in whens:
            args += ["--when", when]
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 1 and message in result.output, result.output
    assert not os.path.exists(os.path.join(os.environ["MEMSELF_HOME"], "project.jsonl"))
