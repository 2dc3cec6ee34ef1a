"""Benchmark: the read-side views at scale: ``memself list`` (default view, ``--json`` page,
``--all``), ``memself open --no-browser`` (regenerating memories.html), and loading that page in
headless Chromium (load plus a search and a page turn given in the URL fragment).

    .venv/bin/python bench/bench_views.py [--facts 100000] [--rules 1000] [--runs 5]

The store is generated into a temporary data directory: project facts spread over a few
workspaces with realistic lengths (about 345 bytes a line, the size of a real store's lines),
rules global. Every row is the median of ``--runs`` fresh processes (wall time and peak RSS).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
WORDS = (
    "支付 灰度 开关 图片 缓存 加载 登录 接口 数据库 迁移 端口 配置 日志 队列 重试 超时 测试 部署 前端 后端"
).split()


def _text(rng: random.Random, number: int) -> str:
    body = "".join(rng.choice(WORDS) for _ in range(rng.randint(6, 12)))
    return f"事实{number}：{body}，相关模块 module_{number % 997}"


def make_store(root: Path, facts: int, rules: int, seed: int = 7) -> None:
    """A data directory with ``facts`` project facts (in five workspaces and global) and ``rules``
    global rules, one JSON line each, in the format memself writes."""
    rng = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    workspaces = [(f"/home/dev/code/service-{n}", f"service-{n}") for n in range(5)]

    def record(number: int, group: str) -> dict[str, object]:
        day = 1 + number % 28
        stamp = f"2026-{1 + number % 11:02d}-{day:02d}T{number % 24:02d}:{number % 60:02d}:00.000Z"
        out: dict[str, object] = {
            "id": f"mem-{number:08d}-{rng.randrange(36**6):06x}",
            "text": _text(rng, number),
            "confidence": round(rng.uniform(0.35, 1.0), 2),
            "category": group,
            "evidence": "用户说明：" + "".join(rng.choice(WORDS) for _ in range(3)),
            "firstSeen": stamp,
            "lastSeen": stamp,
            "deprecated": False,
            "createdAt": stamp,
        }
        if group == "project" and number % 6:
            key, name = workspaces[number % len(workspaces)]
            out["workspace"], out["workspaceName"] = key, name
        return out

    for group, count in (("project", facts), ("rule", rules)):
        with open(root / f"{group}.jsonl", "w", encoding="utf-8") as handle:
            for number in range(count):
                line = json.dumps(record(number, group), ensure_ascii=False, separators=(",", ":"))
                handle.write(line + "\n")


def _run(cmd: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """Wall seconds, peak RSS in MB of the child (GNU time), and the size of its stdout."""
    timed = ["/usr/bin/time", "-f", "%M", *cmd] if Path("/usr/bin/time").exists() else cmd
    started = time.perf_counter()
    out = subprocess.run(timed, env=env, capture_output=True, check=True, stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    tail = out.stderr.decode(errors="replace").strip().splitlines()
    rss = int(tail[-1]) / 1024 if timed is not cmd and tail and tail[-1].isdigit() else float("nan")
    return wall, rss, len(out.stdout)


def _median(cmd: list[str], env: dict[str, str], runs: int, before: Path | None = None) -> str:
    results = []
    for _ in range(runs):
        if before is not None:
            before.unlink(missing_ok=True)  # the cached summaries: measure the cold path
        results.append(_run(cmd, env))
    wall = statistics.median(r[0] for r in results)
    rss = max(r[1] for r in results)
    return f"{wall:.3f} s | {rss:.0f} MB | {results[0][2]} bytes out"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--facts", type=int, default=100_000)
    parser.add_argument("--rules", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="memself-bench-views-") as tmp:
        root = Path(tmp) / "data"
        make_store(root, args.facts, args.rules)
        size = (root / "project.jsonl").stat().st_size
        env = dict(os.environ, MEMSELF_HOME=str(root), HOME=tmp)
        memself = [str(REPO / ".venv" / "bin" / "memself")]
        print(f"store: {args.facts} facts + {args.rules} rules, project.jsonl {size / 1e6:.1f} MB")
        print("| command | median wall | peak RSS | output |")
        print("|---|---|---|---|")
        cache = root / "list-view.json"
        rows = [
            ("memself --help (start-up)", [*memself, "--help"], None),
            ("memself list, summaries not cached (after a write)", [*memself, "list"], cache),
            ("memself list, summaries cached", [*memself, "list"], None),
            ("memself list --json (first 50)", [*memself, "list", "--json"], None),
            (
                "memself list --json --offset 100 (a full read)",
                [*memself, "list", "--json", "--offset", "100"],
                None,
            ),
            ("memself list --all", [*memself, "list", "--all"], None),
            ("memself open --no-browser", [*memself, "open", "--no-browser"], None),
        ]
        for name, cmd, before in rows:
            print(f"| {name} | {_median(cmd, env, args.runs, before)} |")
        page = root / "memories.html"
        print(f"memories.html: {page.stat().st_size / 1e6:.1f} MB")
        if CHROMIUM.exists():
            _chromium_rows(page, Path(tmp), args.runs)


def _chromium_rows(page: Path, tmp: Path, runs: int) -> None:
    """Headless Chromium, until the screenshot is taken (after load, so after the script
    rendered): an empty page (the browser's own start) against the page with and without a
    search and a page turn; the difference is what the page itself costs."""
    empty = tmp / "empty.html"
    empty.write_text("<!DOCTYPE html><title>x</title><p>x</p>", encoding="utf-8")

    def load(url: str) -> float:
        cmd = [
            str(CHROMIUM),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            f"--user-data-dir={tmp / 'profile'}",
            f"--screenshot={tmp / 'shot.png'}",
            "--window-size=1000,1400",
            url,
        ]
        started = time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=True, stdin=subprocess.DEVNULL)
        return time.perf_counter() - started

    base = page.resolve().as_uri()
    print("| chromium page | median wall |")
    print("|---|---|")
    for name, url in (
        ("empty page (browser start)", empty.resolve().as_uri()),
        ("memories.html", base),
        ("memories.html#q=缓存&page=3", base + "#q=%E7%BC%93%E5%AD%98&page=3"),
    ):
        walls = [load(url) for _ in range(runs)]
        print(f"| chromium {name} | {statistics.median(walls):.3f} s |")


if __name__ == "__main__":
    sys.exit(main())
