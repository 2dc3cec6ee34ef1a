"""A model that cannot be loaded never becomes the model in use.

A new user ran ``memself config model no-such/model``: the command said the model was set, then
failed to download it, and config.json kept the name. The engine could not load it, logged
``engine-reload-failed`` and still said "ready" (so did doctor), while recall scored the old
model's vectors against the new model's lines and dropped a rule it used to recall.

Now the command prepares the model first and writes config.json only once that worked; and an
engine whose config.json was edited by hand to a model it cannot load keeps serving the model
its index belongs to, with that model's own lines, and says so in ``engine status``, in doctor
and in the prompt hook's context.

Real parts: ``memself`` processes, a real engine with the offline model, a hub that cannot be
reached (a closed port on 127.0.0.1, so nothing waits on a network timeout).
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest

from memself.config import set_config_value
from memself.doctor import check_engine
from memself.engine.client import call_engine, engine_status, stop_engine
from memself.model.catalog import resolve_model
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from tests.support.backlog_helpers import prompt_hook, start_engine, wait_status
from tests.support.cli import memself

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=timezone.utc)
OFFLINE = "multilingual-e5-small"
MISSING = "no-such/model"
# A rule the offline model recalls for the prompt below with a score under the generic line (the
# line a model without a calibration gets): scored against that line, it would be dropped.
RULE = "Go 的错误要用 fmt.Errorf 加 %w 包装"
PROMPT = "这个 err 怎么处理"
OTHER_RULES = [
    "提交代码之前先在本地跑一遍 make lint 和 make test",
    "改完代码不要自动 commit，等我确认",
    "回答一律用中文",
    "写 Python 时函数都要有类型注解",
    "不要在代码注释里用 emoji",
    "数据库迁移脚本必须可回滚",
    "日志里不能打印用户手机号",
]
GENERIC_RULE_LINE = 0.22


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def no_hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """The hub is a closed port (refused at once) and the Hugging Face cache is empty."""
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_CACHE"):
        monkeypatch.delenv(name, raising=False)
    return endpoint


def _left_behind(cache: Path) -> list[str]:
    """What a preparation left in the model cache: files, and folders named for a model (the
    preparation lock file and the folders holding it aside)."""
    if not cache.exists():
        return []
    return sorted(
        str(p.relative_to(cache))
        for p in cache.rglob("*")
        if (p.is_file() and not p.name.endswith(".lock")) or (p.is_dir() and "no-such" in p.name)
    )


@pytest.mark.parametrize("name", [MISSING, "/no/such/model-folder", "not a model name"])
def test_a_model_that_cannot_be_prepared_leaves_config_json_unchanged(
    name: str, no_hub: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "model-cache"
    monkeypatch.setenv("MEMSELF_MODEL_CACHE", str(cache))
    paths = DataPaths.default()
    paths.ensure()
    set_config_value(paths, "recallTopK", "5")
    set_config_value(paths, "model", OFFLINE)
    before = paths.config.read_bytes()
    started = time.monotonic()
    done = memself("config", "model", name)
    assert time.monotonic() - started < 60, "waited on the network"
    assert done.returncode != 0, done.stdout + done.stderr
    assert "已设为" not in done.stdout, done.stdout
    assert done.stderr.startswith("错误："), done.stderr
    assert paths.config.read_bytes() == before
    if name == MISSING:
        assert "127.0.0.1" in done.stderr and f"仍为 {OFFLINE}" in done.stderr, done.stderr
        assert _left_behind(cache) == []
    assert "Traceback" not in done.stderr


def test_a_model_that_prepares_is_written(model_cache: Path, no_hub: str) -> None:
    paths = DataPaths.default()
    done = memself("config", "model", OFFLINE)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"model 已设为 {OFFLINE}"
    assert json.loads(paths.config.read_text(encoding="utf-8"))["model"] == OFFLINE


@pytest.fixture
def engine_on_offline_model(model_cache: Path, no_hub: str) -> Iterator[tuple[DataPaths, str]]:
    """A real engine on the offline model that recalls ``RULE`` for ``PROMPT``."""
    paths = DataPaths.default()
    paths.ensure()
    os.environ.pop("MEMSELF_ENGINE_SERVICE", None)
    set_config_value(paths, "model", OFFLINE)
    store = MemoryStore(paths)
    rule = store.create(RULE, "rule", NOW.replace(day=1))
    for text in OTHER_RULES:
        store.create(text, "rule", NOW.replace(day=1))
    store.create("支付页新流程的灰度开关是 pay_new_flow，在配置中心 payment 命名空间下", "project", NOW)
    try:
        yield paths, rule.id
    finally:
        stop_engine(paths)


def _recall(paths: DataPaths) -> dict:
    return call_engine(paths, "recall", {"text": PROMPT, "now": NOW.isoformat()}, timeout_s=120)


def _edit_model(paths: DataPaths, model: str) -> None:
    """As a user edits config.json by hand (no memself command in between)."""
    raw = json.loads(paths.config.read_text(encoding="utf-8"))
    raw["model"] = model
    paths.config.write_text(json.dumps(raw, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")


def _log_events(paths: DataPaths) -> list[str]:
    lines = paths.log_file.read_text(encoding="utf-8").splitlines() if paths.log_file.exists() else []
    return [line.split(" ")[2] for line in lines if line.count(" ") >= 2]


def _rule_hit(result: dict, rule_id: str) -> dict | None:
    return next((h for h in result["rule"] if h["id"] == rule_id), None)


def test_a_running_engine_keeps_its_model_and_lines_and_says_so(
    engine_on_offline_model: tuple[DataPaths, str],
) -> None:
    paths, rule_id = engine_on_offline_model
    start_engine(paths)
    before = _rule_hit(_recall(paths), rule_id)
    assert before is not None and 0 < before["score"] < GENERIC_RULE_LINE, before
    assert "model_problem" not in _recall(paths)

    _edit_model(paths, MISSING)
    after = _recall(paths)
    hit = _rule_hit(after, rule_id)
    assert hit is not None, after  # the offline model's vectors, with the offline model's line
    assert hit["score"] == pytest.approx(before["score"], abs=1e-6)
    assert after["model_problem"] == {"wanted": MISSING, "serving": OFFLINE}
    _assert_reported(paths)

    # A memory added meanwhile is encoded with the served model; the failing one is not tried again.
    added = MemoryStore(paths).create("周报每周五下午五点前发到团队群", "rule", NOW.replace(day=2))
    nearest = call_engine(paths, "nearest", {"text": "周报什么时候发", "k": 1}, timeout_s=60)
    assert [item["id"] for item in nearest["items"]] == [added.id]
    assert _log_events(paths).count("engine-model-failed") == 1
    assert "engine-reload-failed" not in _log_events(paths)

    shown = memself("recall", PROMPT)
    assert shown.returncode == 0 and RULE in shown.stdout, shown.stdout + shown.stderr
    assert f"注意：config.json 里的向量模型 {MISSING} 无法加载" in shown.stderr, shown.stderr

    context = prompt_hook(PROMPT)
    assert RULE in context
    assert f"config.json 里的向量模型 {MISSING} 无法加载" in context and OFFLINE in context

    # Back to a model that loads: the problem is gone.
    _edit_model(paths, OFFLINE)
    again = _recall(paths)
    assert "model_problem" not in again and _rule_hit(again, rule_id) is not None
    status = engine_status(paths) or {}
    assert (status.get("service") or {}).get("model_problem") is None
    assert check_engine(paths, wait_s=60).ok is True


def test_an_engine_started_on_an_unloadable_model_serves_the_index_model(
    engine_on_offline_model: tuple[DataPaths, str],
) -> None:
    paths, rule_id = engine_on_offline_model
    start_engine(paths)
    assert _rule_hit(_recall(paths), rule_id) is not None  # the index now holds the offline vectors
    stop_engine(paths)
    _edit_model(paths, MISSING)
    started = memself("engine", "start")
    assert started.returncode == 0 and "召回引擎已就绪" in started.stdout, started.stdout + started.stderr
    assert f"注意：config.json 里的向量模型 {MISSING} 无法加载" in started.stderr, started.stderr
    status = start_engine(paths)
    assert status["state"] == "ready", status
    result = _recall(paths)
    assert _rule_hit(result, rule_id) is not None, result
    assert result["model_problem"] == {"wanted": MISSING, "serving": OFFLINE}
    _assert_reported(paths)
    # The index was not re-encoded for a model that is not served.
    header = json.loads((paths.index_dir / "header.json").read_text(encoding="utf-8"))
    assert header["model"].startswith(resolve_model(OFFLINE).model_id)


def _assert_reported(paths: DataPaths) -> None:
    status = wait_status(paths, lambda s: (s.get("service") or {}).get("model_problem"), timeout_s=60)
    problem = status["service"]["model_problem"]
    assert problem["wanted"] == MISSING and problem["serving"] == OFFLINE and problem["reason"]
    shown = memself("engine", "status")
    assert shown.returncode == 0, shown.stderr
    assert "就绪，但没有用上" in shown.stdout, shown.stdout
    assert f"向量模型 {MISSING} 无法加载" in shown.stdout and f"召回仍在用 {OFFLINE}" in shown.stdout
    assert f"memself config model {OFFLINE}" in shown.stdout
    check = check_engine(paths, wait_s=60)
    assert check.ok is False, check
    assert MISSING in check.summary and OFFLINE in check.summary, check
    assert f"memself config model {OFFLINE}" in check.fix, check


def test_memself_recall_without_an_engine_uses_the_index_model(
    engine_on_offline_model: tuple[DataPaths, str],
) -> None:
    paths, rule_id = engine_on_offline_model
    first = memself("recall", PROMPT, "--json")  # no engine: computed here, the index written
    assert first.returncode == 0, first.stderr
    assert rule_id in [h["id"] for h in json.loads(first.stdout)["rule"]]
    assert engine_status(paths) is None
    _edit_model(paths, MISSING)
    again = memself("recall", PROMPT, "--json")
    assert again.returncode == 0, again.stderr
    assert rule_id in [h["id"] for h in json.loads(again.stdout)["rule"]], again.stdout
    assert f"注意：config.json 里的向量模型 {MISSING} 无法加载" in again.stderr, again.stderr
    assert f"召回仍在用 {OFFLINE}" in again.stderr
