"""A user of the original switches: their data directory as the original left it, then
``memself setup`` without a terminal on a machine that cannot reach the model hub.

The directory holds what years of the original leave behind: a config.json in which every key is
pinned (the original wrote them all on any change), records with the legacy ``observations`` and a
confidence above 1, a blank line in a group file, a deprecated rule, and the original's
``embeddings.jsonl``. Afterwards the user must find what the original would have given them: the
same rules injected in the same order with the same confidences, recall gated by lines made for
the model actually in use, and files the original can still read.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

from memself.config import load_config
from memself.hook.core import handle
from memself.hosts import HOSTS
from memself.model.catalog import OFFLINE_MODEL, resolve_model
from memself.paths import DataPaths
from memself.recall.gate import default_floors
from memself.recall.lines import gate_params
from memself.timeutil import iso, local_day

# Runs setup four times and loads the model: the full group (each part has a fast test of its own).
pytestmark = pytest.mark.full

ORIGINAL = Path(__file__).parents[1] / "fixtures" / "original-store"
NOW = datetime(2026, 12, 25, 9, 0, tzinfo=timezone.utc)
ORIGINAL_KEYS = (
    "id",
    "text",
    "confidence",
    "category",
    "evidence",
    "firstSeen",
    "lastSeen",
    "deprecated",
    "createdAt",
)


def _original_data_dir(paths: DataPaths) -> None:
    shutil.copytree(ORIGINAL, paths.root)
    rules = paths.group_file("rule").read_text("utf-8").splitlines()
    # A blank line, as a hand edit (or an interrupted append) leaves one.
    paths.group_file("rule").write_text("\n".join([rules[0], "", *rules[1:]]) + "\n", "utf-8")
    ids = [
        json.loads(line)["id"]
        for name in ("rule", "project")
        for line in paths.group_file(name).read_text("utf-8").splitlines()
        if line.strip()
    ]
    vectors = [
        json.dumps({"id": mid, "v": [round(0.01 * (i + 1), 4)] * 768, "ev": 4}) for i, mid in enumerate(ids)
    ]
    paths.legacy_embeddings.write_text("\n".join(vectors), "utf-8")  # the original's: no last newline


def _setup_without_terminal(home: Path, model_cache: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.update(
        {
            "HOME": str(home),
            "MEMSELF_MODEL_CACHE": str(model_cache),
            "HF_ENDPOINT": "http://127.0.0.1:9",  # the hub cannot be reached: setup falls back
        }
    )
    return subprocess.run(
        [sys.executable, "-m", "memself", "setup"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


@pytest.fixture
def switched(isolated_home: Path, model_cache: Path) -> DataPaths:
    paths = DataPaths.default()
    _original_data_dir(paths)
    (isolated_home / ".codebuddy").mkdir()
    done = _setup_without_terminal(isolated_home, model_cache)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"离线模型 {OFFLINE_MODEL}" in done.stdout
    return paths


def test_the_original_users_config_stays_theirs_and_the_lines_fit_the_model(switched: DataPaths) -> None:
    before = json.loads((ORIGINAL / "config.json").read_text("utf-8"))
    after = json.loads(switched.config.read_text("utf-8"))
    assert {k: after[k] for k in before} == before  # every key the original reads, as it wrote it
    assert set(after) - set(before) == {"model"}  # setup's fallback, nothing else
    assert after["model"] == OFFLINE_MODEL
    config = load_config(switched)
    floors = gate_params(config, resolve_model(config.model)).floors
    assert floors == default_floors(resolve_model(OFFLINE_MODEL))
    assert floors != {"rule": 0.22, "project": 0.29}


def test_session_start_injects_what_the_original_would(switched: DataPaths) -> None:
    adapter = HOSTS["codebuddy"]
    event = adapter.parse({"hook_event_name": "SessionStart", "session_id": "s-switch"})
    context = handle(event, NOW, switched, in_engine=True).context
    assert "## 规则与偏好（共 2 条，必须遵守）" in context
    first = context.index("1. 回答一律使用中文，代码注释也用中文（置信度 1）")  # 1.15 - 0.05, clamped
    second = context.index("2. 改完代码不要自动 git commit，等我确认（置信度 0.65）")  # idle 54 days
    assert first < second
    assert "旧规则：提交信息用英文" not in context  # deprecated in the original, still deprecated


def test_files_written_back_are_the_originals_shape(switched: DataPaths) -> None:
    vectors_before = switched.legacy_embeddings.read_bytes()
    handle(
        HOSTS["codebuddy"].parse({"hook_event_name": "SessionStart", "session_id": "s"}),
        NOW,
        switched,
        in_engine=True,
    )
    for group in ("rule", "project"):
        text = switched.group_file(group).read_text("utf-8")
        assert text.endswith("\n") and "\n\n" not in text  # the blank line went with the rewrite
        assert "observations" not in text
        for line in text.splitlines():
            record = json.loads(line)
            assert tuple(record)[: len(ORIGINAL_KEYS)] == ORIGINAL_KEYS
    rules = [json.loads(line) for line in switched.group_file("rule").read_text("utf-8").splitlines()]
    assert [(r["id"], r["confidence"], r["deprecated"]) for r in rules] == [
        ("mem-mtfz46ql-w0i5wm", 1, False),
        ("mem-mtg0a1b2-k3l4m5", 0.65, False),
        ("mem-mtg1zzzz-aaaaaa", 0.35, True),
    ]
    assert rules[0]["lastSeen"] == iso(NOW) and rules[0]["evidence"] == "用户说：以后都用中文回答"
    projects = {
        json.loads(line)["id"]: json.loads(line)
        for line in switched.group_file("project").read_text("utf-8").splitlines()
    }
    assert projects["mem-mth00001-pay001"]["confidence"] == 0.55  # idle 30 days: one deduction
    assert projects["mem-mth00002-img002"]["confidence"] == 0.55  # 29 days: untouched
    assert switched.legacy_embeddings.read_bytes() == vectors_before  # the original's file, never written
    state = json.loads(switched.decay_state.read_text("utf-8"))
    assert state["lastRunDate"] == local_day(NOW)


def test_recall_preview_shows_the_models_own_lines(switched: DataPaths, model_cache: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "memself", "recall", "以后回答问题都用中文可以吗"],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    rule_line = default_floors(resolve_model(OFFLINE_MODEL))["rule"]
    assert "【规则】" in done.stdout and f"底线 {rule_line:.3f}" in done.stdout
    assert "底线 0.220" not in done.stdout
    # Under the pinned 0.22 this prompt recalled nothing (its top score sits below it on e5).
    assert "  - 回答一律使用中文，代码注释也用中文（相关度" in done.stdout
