"""`memself config model multilingual-e5-small`, `rule add`, `recall --json` as a user runs them,
with the real offline model and no model hub."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import memself as run_memself


def memself(*args: str) -> subprocess.CompletedProcess:
    return run_memself(*args, env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=300)


def test_recall_json_and_rebuild_index_with_the_offline_model(model_cache: Path) -> None:
    assert memself("config", "model", "multilingual-e5-small").returncode == 0
    memself("rule", "add", "回答和代码注释里都不要用 emoji")
    added = memself("project", "add", "支付页新流程的灰度开关是 pay_new_flow，在配置中心 payment 命名空间下")
    assert added.returncode == 0
    result = memself("recall", "支付页新流程的灰度开关叫什么", "--json")
    assert result.returncode == 0, result.stderr
    hits = json.loads(result.stdout)
    assert set(hits) == {"rule", "project"}
    assert [h["text"] for h in hits["project"]] == [
        "支付页新流程的灰度开关是 pay_new_flow，在配置中心 payment 命名空间下"
    ]
    assert set(hits["project"][0]) == {"id", "text", "score", "confidence"}
    assert hits["project"][0]["confidence"] == 0.5  # a preview rewards nothing
    rebuilt = memself("rebuild-index")
    assert rebuilt.returncode == 0 and "已重建 2 条向量" in rebuilt.stdout


def test_rebuild_index_of_an_empty_store_is_refused() -> None:
    result = memself("rebuild-index")
    assert result.returncode == 1 and "记忆库为空" in result.stderr


@pytest.mark.full
def test_rebuild_index_shows_a_bar_on_a_terminal_and_nothing_in_a_pipe(model_cache: Path) -> None:
    from datetime import datetime, timezone

    from memself.paths import DataPaths
    from memself.store.memory_store import MemoryStore
    from tests.test_installers_terminal import drive

    assert memself("config", "model", "multilingual-e5-small").returncode == 0
    store = MemoryStore(DataPaths.default())
    for i in range(70):  # more than one batch of the index
        store.create(f"第 {i} 条规则：提交前先跑 make test-{i}", "rule", datetime.now(timezone.utc))
    piped = memself("rebuild-index")
    assert piped.returncode == 0 and piped.stdout.startswith("已重建 70 条向量"), piped.stdout
    assert "重建向量" not in piped.stdout + piped.stderr
    code, screen = drive([sys.executable, "-m", "memself", "rebuild-index"], [], timeout=300)
    assert code == 0, screen
    bar = screen.split("已重建 70 条向量")[0]
    assert "重建向量" in bar and "100%" in bar and "#" in bar, screen


@pytest.mark.full
def test_model_status_and_prepare(model_cache: Path, tmp_path: Path) -> None:
    status = memself("model", "status", "multilingual-e5-small", "--json")
    assert status.returncode == 0, status.stderr
    info = json.loads(status.stdout)
    assert info["prepared"] is True and info["folder"].startswith(str(model_cache))
    assert info["size_bytes"] > 400e6 and info["min_cosine"] >= 0.9999
    text = memself("model", "status", "multilingual-e5-small").stdout
    assert text.startswith("向量模型 multilingual-e5-small：已准备") and "MB" in text
    prepared = memself("model", "prepare", "multilingual-e5-small")
    assert prepared.returncode == 0 and prepared.stdout == "", prepared.stdout  # no bar in a pipe
    missing = tmp_path / "not-a-model"
    missing.mkdir()
    status = json.loads(memself("model", "status", str(missing), "--json").stdout)
    assert status["prepared"] is False and status["reason"] == "还没有准备好"
    failed = memself("model", "prepare", str(missing))
    assert failed.returncode == 1 and failed.stderr.startswith("错误：无法加载本地模型文件夹")
    assert "Traceback" not in failed.stderr
