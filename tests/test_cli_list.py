"""`memself list` is a view: counts plus the most confident few, pages in JSON, a stream with
--all, and a cache of the counts that a changed file always invalidates."""

from __future__ import annotations

import json
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from memself.page import listing
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore, render_lines
from memself.store.records import Memory, sort_memories
from memself.store.workspaces import Workspace
from tests.support.cli import memself

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=timezone.utc)
PAY = Workspace(key="/home/dev/code/pay-service", name="pay-service")
SHOP = Workspace(key="/home/dev/code/shop", name="shop")


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def write_store(paths: DataPaths, rules: int, facts: int) -> dict[str, list[Memory]]:
    """Memories with distinct confidences, spread over global, PAY and SHOP, written as the
    store writes them."""
    made: dict[str, list[Memory]] = {"rule": [], "project": []}
    for group, count in (("rule", rules), ("project", facts)):
        for number in range(count):
            where = (None, PAY, SHOP)[number % 3]
            memory = Memory.create(
                f"{group} 第 {number} 条记忆", group, NOW + timedelta(seconds=number), workspace=where
            )
            memory.confidence = round(0.41 + ((number * 37) % 59) / 100, 2)
            memory.lastSeen = (NOW + timedelta(minutes=number)).isoformat()
            made[group].append(memory)
    paths.ensure()
    for group, memories in made.items():
        paths.group_file(group).write_bytes(render_lines(m.to_json() for m in memories))
    return made


def expected_order(made: dict[str, list[Memory]], view: Workspace | None = None) -> list[str]:
    shown = [m for ms in made.values() for m in ms if view is None or m.visible_in(view.key)]
    return [m.id for m in sort_memories(shown)]


def test_default_view_counts_and_the_most_confident() -> None:
    paths = DataPaths.default()
    made = write_store(paths, 40, 90)
    out = ok(memself("list")).splitlines()
    assert out[:3] == [
        "rule    40 条（会话开始全量注入，无条件生效）",
        "project 90 条（按相关性自动召回）",
        "共 130 条",
    ]
    assert "  所有项目：rule 14 条，project 30 条" in out
    assert f"  仅项目 pay-service（{PAY.key}）：rule 13 条，project 30 条" in out
    heading = next(i for i, line in enumerate(out) if line.startswith("置信度最高的 30 条"))
    assert "下一页：--offset 30" in out[heading]
    shown = out[heading + 1 :]
    assert len(shown) == 30
    ids = [line.rsplit("id ", 1)[1].rstrip("）") for line in shown]
    assert ids == expected_order(made)[:30]
    first = next(m for ms in made.values() for m in ms if m.id == ids[0])
    assert shown[0].startswith(f"  [{first.category}] {first.text}（置信度 ")
    # A workspace's view: global memories and that workspace's, never another's.
    view = ok(memself("list", "--workspace", "/home/dev/code/shop", "--limit", "12"))
    assert "pay-service" not in view and "rule 27 条" not in view
    lines = view.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("置信度最高的 12 条"))
    view_ids = [line.rsplit("id ", 1)[1].rstrip("）") for line in lines[start + 1 :]]
    assert view_ids == expected_order(made, SHOP)[:12]


def test_json_pages_cover_everything_once_in_order() -> None:
    paths = DataPaths.default()
    made = write_store(paths, 30, 50)
    first = json.loads(ok(memself("list", "--json")))
    assert (first["rule"], first["project"], first["total"]) == (30, 50, 80)
    assert first["offset"] == 0 and first["limit"] == 50 and first["nextOffset"] == 50
    assert first["workspaces"][0] == {"workspace": None, "workspaceName": None, "rule": 10, "project": 17}
    seen: list[dict[str, Any]] = []
    offset: int | None = 0
    while offset is not None:  # pages of 17: the later ones lie beyond what the summaries hold
        page = json.loads(ok(memself("list", "--json", "--limit", "17", "--offset", str(offset))))
        assert page["offset"] == offset and page["limit"] == 17
        seen += page["memories"]
        offset = page["nextOffset"]
    assert [m["id"] for m in seen] == expected_order(made)
    assert [m["id"] for m in first["memories"]] == expected_order(made)[:50]
    assert {m["workspace"] for m in seen} == {None, PAY.key, SHOP.key}
    empty = json.loads(ok(memself("list", "--json", "--offset", "500")))
    assert empty["memories"] == [] and empty["nextOffset"] is None and empty["total"] == 80


def test_all_streams_every_memory_in_file_order_and_skips_bad_lines() -> None:
    paths = DataPaths.default()
    made = write_store(paths, 5, 7)
    with open(paths.group_file("project"), "ab") as handle:
        handle.write(b"{broken\n")
    result = memself("list", "--all")
    assert result.returncode == 0
    ids = [line.rsplit("id ", 1)[1].rstrip("）") for line in result.stdout.splitlines()]
    assert ids == [m.id for m in made["rule"]] + [m.id for m in made["project"]]
    assert "project.jsonl 第 8 行无法读取（不是合法的 JSON），已跳过" in result.stderr
    lines = ok(memself("list", "--all", "--json", "--workspace", "/home/dev/code/pay-service")).splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["id"] for r in records] == [
        m.id for g in ("rule", "project") for m in made[g] if m.visible_in(PAY.key)
    ]
    assert {r["workspace"] for r in records} == {None, PAY.key}


def test_the_counts_cache_is_used_only_while_the_files_are_unchanged() -> None:
    paths = DataPaths.default()
    write_store(paths, 3, 4)
    assert "共 7 条" in ok(memself("list"))
    cache = listing.cache_path(paths)
    data = json.loads(cache.read_text(encoding="utf-8"))
    # Shown from the cache while project.jsonl keeps its stamp: a planted count proves it is read.
    data["files"]["project"]["scopes"][""][1] = 1000
    cache.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    assert "共 1005 条" in ok(memself("list"))  # 2 global facts counted as 1000
    # The file is rewritten (a new first line): a new stamp and prefix, so it is read again.
    extra = Memory.create("原插件追加的一条项目事实", "project", NOW)
    project = paths.group_file("project")
    project.write_bytes(render_lines([extra.to_json()]) + project.read_bytes())
    listed = ok(memself("list"))
    assert "共 8 条" in listed and "原插件追加的一条项目事实" in listed
    # A cache that is not ours (or broken) is ignored and rewritten.
    cache.write_text("{not json", encoding="utf-8")
    assert "共 8 条" in ok(memself("list"))
    assert json.loads(cache.read_text(encoding="utf-8"))["format"] == 3


def test_appended_lines_are_summarized_from_where_the_cache_ended() -> None:
    paths = DataPaths.default()
    write_store(paths, 2, 6)
    assert "共 8 条" in ok(memself("list"))
    cache = listing.cache_path(paths)
    data = json.loads(cache.read_text(encoding="utf-8"))
    data["files"]["project"]["scopes"][""][1] = 100  # 2 global facts, planted as 100
    cache.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    top = Memory.create("追加的一条高置信度事实", "project", NOW)
    top.confidence = 1.0
    with open(paths.group_file("project"), "ab") as handle:
        handle.write(render_lines([top.to_json()]) + b"{broken\n")
    result = memself("list")
    # Only the appended lines were read: the planted count stays, the new ones add to it.
    assert "所有项目：rule 1 条，project 101 条" in result.stdout and "共 107 条" in result.stdout
    assert result.stdout.splitlines()[
        result.stdout.splitlines().index(
            next(line for line in result.stdout.splitlines() if line.startswith("置信度最高的"))
        )
        + 1
    ].startswith("  [project] 追加的一条高置信度事实（置信度 1，")
    assert "project.jsonl 第 8 行无法读取" in result.stderr
    # A changed earlier line (same length, then an append): the whole file is read again.
    raw = paths.group_file("project").read_bytes()
    paths.group_file("project").write_bytes(raw.replace("第 0 条".encode(), "第 9 条".encode(), 1))
    with open(paths.group_file("project"), "ab") as handle:
        handle.write(render_lines([Memory.create("之后又追加的一条事实", "project", NOW).to_json()]))
    assert "所有项目：rule 1 条，project 4 条" in ok(memself("list"))


def test_open_refreshes_the_page_and_the_cache(tmp_path: Path) -> None:
    paths = DataPaths.default()
    write_store(paths, 2, 2)
    assert "已生成" in ok(memself("open", "--no-browser"))
    assert paths.html.is_file()
    files = json.loads(listing.cache_path(paths).read_text(encoding="utf-8"))["files"]
    assert set(files) == {"rule", "project"}  # no trash file, nothing to key it by
    assert sum(n for _, n, _ in files["project"]["scopes"].values()) == 2


def test_the_line_scan_summarizes_exactly_as_the_store_loads() -> None:
    paths = DataPaths.default()
    made = write_store(paths, 4, 150)
    # Ties on confidence and time (file order decides), odd workspace values, bad lines.
    tied = [Memory.create(f"同分同时的事实 {n}", "project", NOW) for n in range(60)]
    for memory in tied:
        memory.confidence = 0.99
    odd = [
        {
            "id": "mem-odd-rel",
            "text": "相对路径的范围算全局",
            "workspace": "relative/dir",
            "confidence": 0.98,
        },
        {"id": "mem-odd-list", "text": "列表当范围也算全局", "workspace": ["x"], "confidence": 0.97},
        {"id": "mem-odd-name", "text": "只有路径没有名字", "workspace": "/srv/app/", "confidence": 0.96},
        {"id": "mem-odd-int", "text": "整数置信度", "confidence": 1, "lastSeen": 5},
        {"id": "mem-odd-low", "text": "置信度跌到线下的事实", "confidence": 0.3},
        {"id": "mem-odd-flag", "text": "标记为已废弃的事实", "confidence": 0.9, "deprecated": True},
    ]
    with open(paths.group_file("project"), "ab") as handle:
        handle.write(render_lines([m.to_json() for m in tied] + odd))
        handle.write(b'{"id":"x"}\n\xff\xfe\n{"id":"mem-nan","text":"t","confidence":NaN}\n\n[1]\n')
    store = MemoryStore(paths)
    for group in ("rule", "project"):
        scanned_json = listing.scan_group(paths, group).to_json()
        assert scanned_json.pop("prefix")
        loaded_json = listing.summarize_group(store.load_group(group)).to_json()
        assert loaded_json.pop("prefix") is None and scanned_json == loaded_json
    # Summarizing only appended lines on top of an older summary gives the same as a full scan.
    project = paths.group_file("project")
    whole = project.read_bytes()
    cut = whole.index(b"\n", len(whole) // 3) + 1
    project.write_bytes(whole[:cut])
    base = listing.scan_group(paths, "project")
    project.write_bytes(whole)
    assert (
        listing.scan_group(paths, "project", base).to_json() == listing.scan_group(paths, "project").to_json()
    )
    scanned = listing.scan_group(paths, "project")
    assert [p[0] for p in scanned.problems] == [217, 218, 219, 221]
    assert scanned.scopes["/srv/app"] == ["app", 1, 0] and scanned.scopes[""][1] == 50 + 60 + 5
    assert scanned.scopes[""][2] == 2  # the two deprecated ones, by flag and by confidence
    # Ties on confidence and time keep file order, as the store's stable sort does.
    tied_ids = [m.id for m in tied]
    in_top = [r["id"] for r in scanned.top[""] if r["id"] in tied_ids]
    assert in_top and in_top == tied_ids[: len(in_top)]
    assert len(made["project"]) == 150
