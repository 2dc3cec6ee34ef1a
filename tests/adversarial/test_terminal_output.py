"""A hand-edited memory holding terminal escape sequences must not reach the user's terminal raw
through the CLI: it could retitle the window, clear the screen or hide text."""

from __future__ import annotations

import json
import os

from tests.support.cli import memself

ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x1b[8m隐藏\x1b[0m\r"
TEXT = "提交前先跑单元测试" + ESCAPES + "然后再推送"


def _write(group: str, text: str) -> str:
    home = os.environ["MEMSELF_HOME"]
    os.makedirs(home, exist_ok=True)
    record = {
        "id": "mem-term-000001",
        "text": text,
        "confidence": 0.8,
        "category": group,
        "evidence": "",
        "firstSeen": "2026-11-01T00:00:00.000Z",
        "lastSeen": "2026-11-01T00:00:00.000Z",
        "deprecated": False,
        "createdAt": "2026-11-01T00:00:00.000Z",
    }
    with open(os.path.join(home, f"{group}.jsonl"), "w", encoding="utf-8") as handle:
        handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return record["id"]


def test_read_and_list_print_no_control_characters() -> None:
    _write("rule", TEXT)
    for args in (("read", "rule"), ("list",), ("list", "--all")):
        result = memself(*args)
        assert result.returncode == 0, result.stderr
        assert "提交前先跑单元测试" in result.stdout
        assert not any(ch in result.stdout for ch in "\x1b\x07\r"), repr(result.stdout)


def test_delete_and_trash_print_no_control_characters() -> None:
    mem_id = _write("rule", TEXT)
    deleted = memself("delete", mem_id)
    trash = memself("trash")
    restored = memself("restore", mem_id)
    for result in (deleted, trash, restored):
        assert result.returncode == 0, result.stderr
        assert not any(ch in result.stdout for ch in "\x1b\x07\r"), repr(result.stdout)


def test_a_workspace_name_and_path_print_no_control_characters() -> None:
    mem_id = _write("rule", "提交前先跑单元测试然后再推送")
    path = os.path.join(os.environ["MEMSELF_HOME"], "rule.jsonl")
    with open(path, encoding="utf-8") as handle:
        record = json.loads(handle.read())
    record.update(workspace="/code/pay" + ESCAPES, workspaceName="pay" + ESCAPES)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    for args in (("read", "rule"), ("list",), ("move", mem_id, "--global")):
        result = memself(*args)
        assert result.returncode == 0, result.stderr
        assert "pay" in result.stdout
        assert not any(ch in result.stdout for ch in "\x1b\x07\r"), repr(result.stdout)
