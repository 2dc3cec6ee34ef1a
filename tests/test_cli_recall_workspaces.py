"""`memself recall` previews what a session in a directory would get: the global memories and
that workspace's, never another's; in this process (no engine) and through a warm engine alike.
Real offline model, real subprocesses in real directories."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest

from memself.config import set_config_value
from memself.engine.client import call_engine, stop_engine
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from memself.store.workspaces import workspace_of

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=timezone.utc)
PROMPT = "支付页新流程的灰度开关叫什么"
FACT = "支付页新流程的灰度开关是 pay_new_flow，在配置中心 payment 命名空间下"
RULE = "回答和代码注释里都不要用 emoji"


@pytest.fixture
def setup(model_cache: Path, tmp_path: Path) -> Iterator[tuple[DataPaths, dict[str, Path], str]]:
    """Two repositories and a directory outside them; the fact belongs to pay, the rule is global."""
    dirs = {name: tmp_path.resolve() / name for name in ("pay", "shop", "loose")}
    for name in ("pay", "shop"):
        (dirs[name] / ".git").mkdir(parents=True)
        (dirs[name] / "src").mkdir()
    dirs["loose"].mkdir()
    paths = DataPaths.default()
    paths.ensure()
    set_config_value(paths, "model", "multilingual-e5-small")
    os.environ.pop("MEMSELF_ENGINE_SERVICE", None)
    store = MemoryStore(paths)
    fact = store.create(FACT, "project", NOW, workspace=workspace_of(str(dirs["pay"])))
    store.create(RULE, "rule", NOW)
    yield paths, dirs, fact.id
    stop_engine(paths)


def recall(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "memself", "recall", PROMPT, *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        cwd=cwd,
    )


def project_ids(result: subprocess.CompletedProcess) -> list[str]:
    assert result.returncode == 0, result.stderr
    return [hit["id"] for hit in json.loads(result.stdout)["project"]]


def check_scoping(dirs: dict[str, Path], fact_id: str) -> None:
    assert project_ids(recall(dirs["pay"] / "src", "--json")) == [fact_id]  # the working directory's
    assert project_ids(recall(dirs["shop"], "--json")) == []  # another repository never sees it
    assert project_ids(recall(dirs["loose"], "--json")) == []
    assert project_ids(recall(dirs["shop"], "--json", "--workspace", str(dirs["pay"] / "src"))) == [fact_id]
    assert project_ids(recall(dirs["pay"], "--json", "--workspace", str(dirs["shop"]))) == []


def test_local_recall_is_scoped_to_the_directory(setup: tuple[DataPaths, dict[str, Path], str]) -> None:
    # Each call loads the model in its own process: two calls, one per side of the scope (the
    # engine test below walks every case).
    paths, dirs, fact_id = setup
    assert project_ids(recall(dirs["pay"] / "src", "--json")) == [fact_id]
    text = recall(dirs["pay"], "--workspace", str(dirs["shop"]))
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith(f"范围：在 shop（{dirs['shop']}）里开的会话")
    assert "pay_new_flow" not in text.stdout
    assert MemoryStore(paths).read_group("project")[0].confidence == 0.5  # a preview rewards nothing


def test_engine_preview_is_scoped_the_same(setup: tuple[DataPaths, dict[str, Path], str]) -> None:
    paths, dirs, fact_id = setup
    call_engine(paths, "recall", {"text": "预热", "now": NOW.isoformat()}, timeout_s=120)
    before = call_engine(paths, "status", {}, timeout_s=10)["requests"]
    check_scoping(dirs, fact_id)
    after = call_engine(paths, "status", {}, timeout_s=10)["requests"]
    assert after >= before + 5  # every preview above was the engine's
