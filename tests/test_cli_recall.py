"""`memself config model multilingual-e5-small`, `rule add`, `recall --json` as a user runs them,
with the real offline model and no model hub."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def memself(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "memself", *args], capture_output=True, text=True,
                          timeout=300, env=env)


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
        "支付页新流程的灰度开关是 pay_new_flow，在配置中心 payment 命名空间下"]
    assert set(hits["project"][0]) == {"id", "text", "score", "confidence"}
    assert hits["project"][0]["confidence"] == 0.5  # a preview rewards nothing
    rebuilt = memself("rebuild-index")
    assert rebuilt.returncode == 0 and "已重建 2 条向量" in rebuilt.stdout


def test_rebuild_index_of_an_empty_store_is_refused() -> None:
    result = memself("rebuild-index")
    assert result.returncode == 1 and "记忆库为空" in result.stderr
