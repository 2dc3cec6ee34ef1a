"""A store written by the original Node plugin loads unchanged; rewriting drops observations and clamps."""

from __future__ import annotations

import shutil
from pathlib import Path

from memself.config import load_config
from memself.maintenance import run_daily_maintenance
from memself.paths import DataPaths
from memself.store import MemoryStore
from tests.support.helpers import T0

FIXTURE = Path(__file__).parent / "fixtures" / "original-store"


def _copy_fixture() -> DataPaths:
    paths = DataPaths.default()
    shutil.copytree(FIXTURE, paths.root)
    return paths


def test_original_files_load_unchanged() -> None:
    paths = _copy_fixture()
    before = {p.name: p.read_bytes() for p in paths.root.iterdir()}
    store = MemoryStore(paths)
    rules = store.read_group("rule")
    assert [m.id for m in rules][:2] == ["mem-mtfz46ql-w0i5wm", "mem-mtg0a1b2-k3l4m5"]
    assert rules[0].confidence == 1.15  # kept as stored until the daily check clamps it
    assert not rules[2].active
    projects = store.read_group("project")
    assert projects[1].category == "project"  # missing category falls back to the file's group
    assert all("observations" not in m.to_json() for m in rules + projects)
    assert load_config(paths).recallTopK == 3
    after = {p.name: p.read_bytes() for p in paths.root.iterdir()}
    assert after == before  # reading never rewrites


def test_rewrite_drops_observations_and_daily_check_clamps() -> None:
    paths = _copy_fixture()
    run_daily_maintenance(paths, 30, T0.replace(year=2026, month=11, day=27))
    text = paths.group_file("rule").read_text("utf-8")
    assert "observations" not in text
    store = MemoryStore(paths)
    first = store.get("mem-mtfz46ql-w0i5wm")
    assert first.confidence == 1 and first.evidence == "用户说：以后都用中文回答"
    assert store.get("mem-mth00001-pay001").text.startswith("支付页新流程")


def test_reinforcing_a_legacy_record_keeps_evidence_and_drops_observations() -> None:
    paths = _copy_fixture()
    store = MemoryStore(paths)
    store.reinforce("mem-mth00001-pay001", T0.replace(day=28))
    memory = store.get("mem-mth00001-pay001")
    assert memory.confidence == 0.7 and memory.evidence == "用户陈述"
    assert "observations" not in paths.group_file("project").read_text("utf-8")
