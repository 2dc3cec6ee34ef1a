"""`memself recall` / `memself verify` plumbing over a real store, index and the offline model."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from memself.cli.recall_run import (
    local_recall,
    render_recall_json,
    render_recall_text,
    verify_command,
)
from memself.config import load_config
from memself.errors import InvalidInput
from memself.model.catalog import OFFLINE_MODEL
from memself.paths import DataPaths
from memself.recall.scoring import load_recaller
from memself.store.memory_store import MemoryStore

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def recaller(e5_encoder, tmp_path_factory):
    return load_recaller(e5_encoder, OFFLINE_MODEL, tmp_path_factory.mktemp("space"))


@pytest.fixture
def seeded() -> DataPaths:
    paths = DataPaths.default()
    paths.ensure()
    (paths.root / "config.json").write_text(json.dumps({"model": OFFLINE_MODEL}), encoding="utf-8")
    store = MemoryStore(paths)
    store.create("写 Dockerfile 用多阶段构建，基础镜像不要用 latest 标签。", "rule", NOW)
    store.create(
        "订单服务的日志统一在 Kibana 查：kibana.example-corp.com，索引按服务名拆分。", "project", NOW
    )
    old = store.create("测试环境的管理员账号是 admin_test，密码在 QA 保险库里。", "project", NOW)
    store.delete([old.id], NOW)
    return paths


def test_local_recall_explains_without_rewarding(seeded: DataPaths, recaller) -> None:
    before = {m.id: (m.confidence, m.lastSeen) for m in MemoryStore(seeded).all()}
    config = load_config(seeded)
    res = local_recall("帮我给订单服务写个 Dockerfile", seeded, config, recaller=recaller)
    assert [h.text.split("，")[0] for h in res.groups["rule"].hits] == ["写 Dockerfile 用多阶段构建"]
    js = render_recall_json(res)
    assert set(js) == {"rule", "project"} and js["rule"][0]["confidence"] == 0.5
    text = render_recall_text(res)
    assert "【规则】" in text and "【项目事实】" in text and "本轮的线" in text
    assert "只是预览" in text
    # No reward, no timestamp change: a preview.
    after = {m.id: (m.confidence, m.lastSeen) for m in MemoryStore(seeded).all()}
    assert after == before


def test_local_recall_unrelated_prompt_says_nothing_recalled(seeded: DataPaths, recaller) -> None:
    res = local_recall("给我讲个关于猫的笑话", seeded, load_config(seeded), recaller=recaller)
    assert res.hit_ids == []
    assert "不会召回任何记忆" in render_recall_text(res)
    with pytest.raises(InvalidInput):
        local_recall("   ", seeded, load_config(seeded), recaller=recaller)


def test_verify_command_reads_original_cases_from_data_dir(seeded: DataPaths, recaller) -> None:
    config = load_config(seeded)
    with pytest.raises(InvalidInput, match="找不到用例文件"):
        verify_command(None, seeded, config, NOW, recaller=recaller)
    seeded.verify_cases.write_text(
        json.dumps(
            {
                "relevant": [
                    ["帮我给订单服务写个 Dockerfile", "多阶段构建"],
                    ["订单服务的报错日志去哪查", "Kibana"],
                ]
            },
            ensure_ascii=False,
        ),
        encoding="utf-8",
    )
    res = verify_command(None, seeded, config, NOW, recaller=recaller)
    assert res.fmt == "original" and res.relevant_total == 2 and res.relevant_hits == 2
    assert res.harmful == 0 and res.passed


def test_verify_command_with_dev_file(seeded: DataPaths, recaller, tmp_path: Path) -> None:
    cases = tmp_path / "c.json"
    cases.write_text(
        json.dumps(
            {
                "memories": [{"key": "r", "group": "rule", "text": "回答和代码注释里都不要用 emoji。"}],
                "relevant": [{"prompt": "给这段代码加点注释", "expect": ["r"]}],
                "irrelevant": [{"prompt": "讲讲 HTTPS 的握手过程"}],
            },
            ensure_ascii=False,
        ),
        encoding="utf-8",
    )
    res = verify_command(cases, seeded, load_config(seeded), NOW, recaller=recaller)
    assert res.fmt == "dev" and res.groups["rule"].cases == 1 and res.groups["rule"].hits == 1
    assert res.groups["rule"].leaks == 0
