"""memories.html: ordering, escaping, deprecation marks, atomic writes, and a real Chromium render."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import struct
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from memself.page import html as snapshot
from memself.page.assets import SCRIPT
from memself.page.html import render_html, write_snapshot
from memself.paths import DataPaths
from memself.store.records import Memory
from tests.support.chromium import screenshot_browser

DATA_OPEN = '<script type="application/json" id="memself-data">'
TZ8 = timezone(timedelta(hours=8))
NOW = datetime(2026, 11, 30, 16, 48, tzinfo=TZ8)
SCRIPT_TEXT = "<script>document.title='pwned'</script> 这条记忆想注入脚本"
QUOTE_ID = "mem-q\"'><marquee onmouseover=\"document.title='pwned'\">x"
QUOTE_EVIDENCE = "\"><img src=x onerror=\"document.title='pwned'\"> 依据 & 'quotes'"


def mem(
    mem_id: str,
    text: str,
    confidence: float,
    *,
    category: str = "rule",
    deprecated: bool = False,
    evidence: str = "",
    last: str = "2026-11-29T08:00:00.000Z",
    created: str = "2026-10-01T02:00:00.000Z",
    **workspace: str,
) -> SimpleNamespace:
    # Duck-typed record with the original's field names (and memself's workspace fields when
    # given); the real Memory is covered separately.
    return SimpleNamespace(
        id=mem_id,
        text=text,
        confidence=confidence,
        category=category,
        evidence=evidence,
        firstSeen=created,
        lastSeen=last,
        deprecated=deprecated,
        createdAt=created,
        **workspace,
    )


def sample_groups() -> dict[str, list[SimpleNamespace]]:
    return {
        "rule": [
            mem("mem-r-zh", "回答一律使用中文", 0.5, evidence="用户通过 CLI 直接添加"),
            mem(
                "mem-r-commit",
                "改完代码不要自动 commit，先让我看 diff",
                1.0,
                evidence="用户说：改完别自动提交",
            ),
            mem("mem-r-script", SCRIPT_TEXT, 0.7),
            mem(QUOTE_ID, "带引号的 id 和依据也要转义", 0.6, evidence=QUOTE_EVIDENCE),
            mem("mem-r-old", "旧规则：缩进一律用 tab", 0.4, deprecated=True, evidence="早期偏好"),
        ],
        "project": [
            mem(
                "mem-p-flag",
                "支付页新流程的灰度开关是 pay_new_flow",
                0.6,
                category="project",
                evidence="用户在讨论支付页时说明",
            ),
            mem("mem-p-img", "ImageLoader 负责图片加载与缓存", 0.55, category="project"),
        ],
    }


def workspace_groups() -> dict[str, list[SimpleNamespace]]:
    """The sample plus memories of two workspaces (one named like markup, to be escaped)."""
    groups = sample_groups()
    pay = {"workspace": "/home/dev/code/pay-service", "workspaceName": "pay-service"}
    odd = {"workspace": "/home/dev/<b>odd</b>", "workspaceName": "<b>odd</b>"}
    groups["rule"].append(mem("mem-w-lint", "支付服务提交前先跑 make lint", 0.9, **pay))
    groups["project"] += [
        mem("mem-w-port", "支付服务本地端口是 8443", 0.7, category="project", **pay),
        mem("mem-w-odd", "奇怪名字的项目也要正常显示", 0.6, category="project", **odd),
    ]
    return groups


class PageParser(HTMLParser):
    """Collects tags, attributes, the title, the scope sections and each card's text and scope,
    as a browser's DOM would."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.title = ""
        self.cards: list[dict[str, object]] = []
        self.scopes: list[dict[str, str]] = []  # per scope section: its workspace and h2 text
        self._stack: list[str] = []
        self._card_depth: int | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = dict(attrs)
        self.tags.append((tag, attr))
        if tag in {"meta", "br", "img", "link", "input"}:
            return
        self._stack.append(tag)
        if tag == "section" and "scope" in (attr.get("class") or "").split():
            self.scopes.append({"workspace": attr.get("data-workspace") or "", "heading": ""})
        if tag == "li" and "card" in (attr.get("class") or ""):
            scope = self.scopes[-1]["workspace"] if self.scopes else None
            self.cards.append(
                {"id": attr.get("data-id"), "class": attr.get("class"), "text": "", "scope": scope}
            )
            self._card_depth = len(self._stack)

    def handle_endtag(self, tag: str) -> None:
        if self._stack and self._stack[-1] == tag:
            if self._card_depth == len(self._stack):
                self._card_depth = None
            self._stack.pop()

    def handle_data(self, data: str) -> None:
        if self._stack and self._stack[-1] == "title":
            self.title += data
        if "h2" in self._stack and self.scopes:
            self.scopes[-1]["heading"] += data
        if self._card_depth is not None and self.cards:
            self.cards[-1]["text"] = str(self.cards[-1]["text"]) + data


def page_data(page: str) -> dict[str, Any]:
    """The JSON data block of a generated page, decoded as the page's script decodes it."""
    start = page.index(DATA_OPEN) + len(DATA_OPEN)
    return dict(json.loads(page[start : page.index("</script>", start)]))


def rows(page: str) -> dict[str, list[Any]]:
    return {row[0]: row for row in page_data(page)["rows"]}


def parse(page: str) -> PageParser:
    parser = PageParser()
    parser.feed(page)
    parser.close()
    return parser


@pytest.fixture(autouse=True)
def local_zone_utc8(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Times are shown in the user's local zone; pin it to UTC+8 (POSIX TZ needs no tzdata)."""
    monkeypatch.setenv("TZ", "CST-8")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


# --- the page itself ------------------------------------------------------------------------


def test_groups_sorted_by_confidence_then_last_activity() -> None:
    groups = {
        "rule": [
            mem("mem-low", "置信度低的规则内容", 0.55),
            mem("mem-tie-old", "同分但较早活跃的规则", 0.8, last="2026-11-01T00:00:00.000Z"),
            mem("mem-top", "置信度最高的规则内容", 0.95),
            mem("mem-tie-new", "同分且最近活跃的规则", 0.8, last="2026-11-28T00:00:00.000Z"),
            # No lastSeen: createdAt stands in, as in the original's sort.
            mem(
                "mem-tie-created", "同分只有创建时间的规则", 0.8, last="", created="2026-11-20T00:00:00.000Z"
            ),
        ],
        "project": [
            mem("mem-p1", "项目事实甲乙丙丁", 0.5, category="project"),
            mem("mem-p2", "项目事实戊己庚辛", 0.9, category="project"),
        ],
    }
    ids = list(rows(render_html(groups, NOW)))
    assert ids == ["mem-top", "mem-tie-new", "mem-tie-created", "mem-tie-old", "mem-low", "mem-p2", "mem-p1"]


def test_float_drift_does_not_break_ties() -> None:
    # 0.45 + 0.05 - 0.05 style arithmetic must still tie with a stored 0.45.
    drifted = 0.1 + 0.35
    assert drifted != 0.45
    groups = {
        "rule": [
            mem("mem-a", "漂移的置信度规则", drifted, last="2026-11-01T00:00:00.000Z"),
            mem("mem-b", "存储的置信度规则", 0.45, last="2026-11-02T00:00:00.000Z"),
        ]
    }
    assert list(rows(render_html(groups, NOW))) == ["mem-b", "mem-a"]


def test_every_text_stays_data_and_only_our_script_may_run() -> None:
    page = render_html(workspace_groups(), NOW)
    parsed = parse(page)
    # Nothing the user wrote became markup: two script elements (the data block and ours), no
    # img, no b, no event handler anywhere; no memory text can close the data block.
    assert [a for t, a in parsed.tags if t == "script"] == [
        {"type": "application/json", "id": "memself-data"},
        {},
    ]
    assert [t for t, _ in parsed.tags if t in {"img", "marquee", "iframe"}] == []
    assert not [(t, k) for t, a in parsed.tags for k in a if k.startswith("on")]
    assert page.count("</script") == 2 and page.count("<script") == 2
    data = page[page.index(DATA_OPEN) + len(DATA_OPEN) : page.rindex("<script>")]
    assert not set("<>&") & set(data.removesuffix("</script>\n"))
    assert page[page.rindex("<script>") + len("<script>") : page.rindex("</script>")] == SCRIPT
    # ...and each string comes back verbatim from the data.
    by_id = rows(page)
    assert by_id["mem-r-script"][1] == SCRIPT_TEXT
    assert by_id[QUOTE_ID][5] == QUOTE_EVIDENCE
    # The policy allows exactly that script, by its hash, and nothing from anywhere else.
    digest = base64.b64encode(hashlib.sha256(SCRIPT.encode("utf-8")).digest()).decode()
    policy = next(a["content"] for t, a in parsed.tags if a.get("http-equiv") == "Content-Security-Policy")
    assert policy is not None and f"script-src 'sha256-{digest}'" in policy and "default-src 'none'" in policy
    assert "unsafe-eval" not in policy and "script-src 'unsafe-inline'" not in policy


def test_deprecated_memories_are_marked_and_counted() -> None:
    groups = sample_groups()
    # Confidence at the line without the flag (legacy data) counts as deprecated too.
    groups["project"].append(mem("mem-p-sunk", "置信度已经跌到零点四的事实", 0.4, category="project"))
    page = render_html(groups, NOW)
    assert {i for i, row in rows(page).items() if row[9]} == {"mem-r-old", "mem-p-sunk"}
    assert page_data(page)["badge"] == "已废弃"
    assert "规则与偏好 <b>5</b> 条（其中已废弃 1 条）" in page
    assert "项目事实 <b>3</b> 条（其中已废弃 1 条）" in page


def test_rows_carry_confidence_times_evidence_and_the_generation_time() -> None:
    by_id = rows(render_html(sample_groups(), NOW))
    assert by_id["mem-r-commit"][1:7] == [
        "改完代码不要自动 commit，先让我看 diff",
        1.0,
        "2026-11-29T08:00:00.000Z",  # stored times: the page shows them in the reader's zone
        "2026-10-01T02:00:00.000Z",
        "用户说：改完别自动提交",
        "",
    ]
    utc_now = NOW.astimezone(timezone.utc)
    assert "生成于 <time>2026-11-30 16:48 UTC+08:00</time>" in render_html(sample_groups(), utc_now)


def test_odd_values_render_without_crashing() -> None:
    groups = {
        "rule": [
            mem("mem-odd", "时间和置信度都不规整", 1.15, last="not-a-time"),
            SimpleNamespace(id="mem-bare", text="只有最少字段的记录", confidence="x"),
            mem("mem-nan", "置信度不是数", float("nan")),
        ]
    }
    by_id = rows(render_html(groups, NOW))
    assert by_id["mem-odd"][2:4] == [1.15, "not-a-time"]
    assert by_id["mem-bare"][2:6] == [0.0, "", "", ""] and by_id["mem-bare"][9] == 1
    assert by_id["mem-nan"][2] == 0.0


def test_empty_groups_and_self_contained() -> None:
    empty = render_html({}, NOW)
    assert page_data(empty)["rows"] == []
    assert [g[1] for g in page_data(empty)["groups"]] == ["规则与偏好", "项目事实"]
    full = render_html(sample_groups(), NOW)
    parsed = parse(full)
    # Nothing that loads: no linking tags, no src/href attribute anywhere, no URLs in the CSS.
    assert not [t for t, _ in parsed.tags if t in {"link", "img", "iframe", "object", "embed"}]
    assert not [(t, k) for t, a in parsed.tags for k in a if k in {"src", "href", "srcset", "action"}]
    css = full[full.index("<style>") : full.index("</style>")].lower()
    for needle in ("http", "url(", "@import", "@font-face"):
        assert needle not in css, needle
    for needle in ("http", "fetch(", "xmlhttprequest", "import(", "eval(", "innerhtml", "new function"):
        assert needle not in SCRIPT.lower(), needle


def test_memories_are_grouped_by_workspace() -> None:
    page = render_html(workspace_groups(), NOW)
    data = page_data(page)
    assert [s[:2] for s in data["scopes"]] == [
        ["", "所有项目"],
        ["/home/dev/<b>odd</b>", "<b>odd</b>"],
        ["/home/dev/code/pay-service", "pay-service"],
    ]
    scope_of = {row[0]: data["scopes"][row[7]][0] for row in data["rows"]}
    assert {i for i, s in scope_of.items() if s} == {"mem-w-lint", "mem-w-port", "mem-w-odd"}
    assert scope_of["mem-w-lint"] == scope_of["mem-w-port"] == "/home/dev/code/pay-service"
    # Rows run scope by scope, each group in confidence order within it.
    ids = [row[0] for row in data["rows"]]
    assert ids.index("mem-w-lint") < ids.index("mem-w-port") < ids.index("mem-w-lint") + 2
    assert [row[7] for row in data["rows"]] == sorted(row[7] for row in data["rows"])
    assert "<b>odd</b>" not in page and "&lt;b&gt;odd&lt;/b&gt;" in page  # the odd name stayed text
    # Totals count every scope; the overview lists each scope with its counts as plain markup.
    assert "规则与偏好 <b>6</b> 条（其中已废弃 1 条）" in page and "项目事实 <b>4</b> 条" in page
    assert "其中 <b>3</b> 条只属于某个项目（2 个项目）" in page
    assert "pay-service</span>" not in page  # the name is followed by its path
    assert (
        '<span class="name">pay-service<code>/home/dev/code/pay-service</code></span>'
        '<span class="count">规则与偏好 1 条，项目事实 1 条</span>'
    ) in page


def test_a_page_without_workspaces_has_only_the_global_scope() -> None:
    page = render_html(sample_groups(), NOW)
    assert [s[0] for s in page_data(page)["scopes"]] == [""]
    assert "只属于某个项目" not in page


def test_real_memory_records_render() -> None:
    created = Memory.create("回答一律使用中文，包括代码注释", "rule", NOW, evidence="CLI")
    legacy = Memory.from_json(
        {
            "id": "mem-legacy1-abcdef",
            "text": "旧版本留下的记录 <b>粗</b>",
            "confidence": 0.35,
            "category": "project",
            "deprecated": True,
            "observations": 20,
            "createdAt": "2025-01-01T00:00:00.000Z",
        },
        "project",
    )
    assert legacy is not None
    by_id = rows(render_html({"rule": [created], "project": [legacy]}, NOW))
    assert list(by_id) == [created.id, "mem-legacy1-abcdef"]
    assert by_id[created.id][2] == 0.5 and by_id[created.id][9] == 0
    assert by_id["mem-legacy1-abcdef"][1] == "旧版本留下的记录 <b>粗</b>"
    assert (
        by_id["mem-legacy1-abcdef"][3] == "2025-01-01T00:00:00.000Z" and by_id["mem-legacy1-abcdef"][9] == 1
    )


def test_applies_when_is_carried_as_text() -> None:
    when = ("记一下取件时间", "<script>document.title='pwned'</script>")
    created = Memory.create("所有存库的时间一律使用 UTC", "rule", NOW, applies_when=when)
    page = render_html({"rule": [created]}, NOW)
    assert rows(page)[created.id][6] == "记一下取件时间；<script>document.title='pwned'</script>"
    assert page.count("<script") == 2
    assert (
        rows(render_html({"rule": [Memory.create("回答一律使用中文", "rule", NOW)]}, NOW)).popitem()[1][6]
        == ""
    )


def test_write_snapshot_is_atomic_and_removes_legacy_markdown(monkeypatch: pytest.MonkeyPatch) -> None:
    paths = DataPaths.default()
    paths.ensure()
    paths.legacy_markdown.write_text("# 旧快照\n", encoding="utf-8")
    target = write_snapshot(paths, sample_groups(), NOW)
    assert target == paths.html
    assert not paths.legacy_markdown.exists()
    first = target.read_text(encoding="utf-8")
    assert first == render_html(sample_groups(), NOW)
    assert oct(target.stat().st_mode & 0o777) == oct(0o600)

    # A rename that fails (full disk, crash) leaves the previous page whole and no temp behind.
    def broken_replace(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        write_snapshot(paths, {"rule": [mem("mem-new", "这条不该出现在页面里", 0.5)]}, NOW)
    monkeypatch.undo()
    assert target.read_text(encoding="utf-8") == first
    assert sorted(p.name for p in paths.root.iterdir()) == ["memories.html"]


def test_write_snapshot_creates_the_data_directory() -> None:
    paths = DataPaths.default()
    assert not paths.root.exists()
    write_snapshot(paths, {}, NOW)
    assert paths.html.is_file()
    assert oct(paths.root.stat().st_mode & 0o777) == oct(0o700)


def test_snapshot_module_imports_only_the_standard_library() -> None:
    # The store (hook path) regenerates the page, so this module must not pull heavy packages.
    root = str(Path(snapshot.__file__).resolve().parents[2])
    code = (
        f"import sys; sys.path.insert(0, {root!r}); import memself.page.html; "
        "heavy = {'numpy', 'torch', 'sentence_transformers', 'httpx', 'mcp', 'click', 'jieba'}"
        "; print(sorted(heavy & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- real headless Chromium -----------------------------------------------------------------


@pytest.fixture(scope="module")
def chromium() -> Path:
    """A Chromium already on the machine and a CJK font (tests/support/chromium.py: the test
    command installs neither). Without them the screenshot tests are skipped, saying how to
    install them, except in CI, where they must run."""
    browser, why = screenshot_browser()
    if browser is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI: the screenshot test must run, but {why}")
        pytest.skip(why)
    return browser


def run_chromium(
    browser: Path, page: Path, workdir: Path, width: int = 1000, height: int = 1400, fragment: str = ""
) -> tuple[str, Path]:
    """Render ``page`` (at ``fragment``: the page's search and paging state) in headless Chromium
    in UTC+8; return the DOM after load and the screenshot."""
    png = workdir / "shot.png"
    png.unlink(missing_ok=True)
    env = dict(
        os.environ,
        XDG_CONFIG_HOME=str(workdir / "xdg-config"),
        XDG_CACHE_HOME=str(workdir / "xdg-cache"),
        TZ="Asia/Shanghai",  # Chromium carries its own zone data
    )
    cmd = [
        str(browser),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        f"--user-data-dir={workdir / 'profile'}",
        f"--screenshot={png}",
        f"--window-size={width},{height}",
        "--dump-dom",
        page.resolve().as_uri() + fragment,
    ]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, env=env, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert png.is_file(), proc.stderr[-2000:]
    return proc.stdout, png


def decode_png(data: bytes) -> tuple[int, int, int, list[bytes]]:
    """Width, height, bytes per pixel and unfiltered rows of an 8-bit RGB/RGBA PNG (stdlib)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        ftype = raw[start]
        line = bytearray(raw[start + 1 : start + 1 + stride])
        if ftype == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 0xFF
        elif ftype == 2:
            line = bytearray((a + b) & 0xFF for a, b in zip(line, prev, strict=True))
        elif ftype == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 0xFF
        elif ftype == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b = prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


def colour_stats(rows: list[bytes], bpp: int) -> dict[tuple[int, int, int], int]:
    counts: dict[tuple[int, int, int], int] = {}
    for row in rows:
        for i in range(0, len(row), bpp):
            key = (row[i], row[i + 1], row[i + 2])
            counts[key] = counts.get(key, 0) + 1
    return counts


def test_page_in_headless_chromium(chromium: Path, tmp_path: Path) -> None:
    page = tmp_path / "memories.html"
    page.write_text(render_html(workspace_groups(), NOW), encoding="utf-8")
    dom, png = run_chromium(chromium, page, tmp_path)

    parsed = parse(dom)
    # The injected script neither exists as an element nor ran (it would have set the title).
    assert parsed.title == "长期记忆快照"
    assert [a for t, a in parsed.tags if t == "script"] == [
        {"type": "application/json", "id": "memself-data"},
        {},
    ]
    assert [t for t, _ in parsed.tags if t in {"img", "marquee"}] == []
    assert "&lt;script&gt;document.title='pwned'&lt;/script&gt;" in dom
    by_id = {c["id"]: c for c in parsed.cards}
    assert SCRIPT_TEXT in str(by_id["mem-r-script"]["text"])
    assert QUOTE_EVIDENCE in str(by_id[QUOTE_ID]["text"])
    assert len(parsed.cards) == 10
    assert "已废弃" in str(by_id["mem-r-old"]["text"])
    assert "deprecated" in str(by_id["mem-r-old"]["class"]).split()
    # The script rendered the cards: confidence, evidence, times in the reader's zone (UTC+8).
    text = str(by_id["mem-r-commit"]["text"])
    assert "1.00" in text and "依据：用户说：改完别自动提交" in text
    assert "最近活跃2026-11-29 16:00 UTC+08:00" in text and "创建2026-10-01 10:00 UTC+08:00" in text
    assert '<i style="width: 100%;">' in dom  # confidence 1.0 fills its bar
    # The browser's DOM keeps the grouping: global first, then each workspace with its path.
    scopes = [s["workspace"] for s in parsed.scopes]
    assert scopes == ["", "/home/dev/<b>odd</b>", "/home/dev/code/pay-service"]
    assert parsed.scopes[2]["heading"] == "pay-service/home/dev/code/pay-service2 条"
    assert {c["id"] for c in parsed.cards if c["scope"] == "/home/dev/code/pay-service"} == {
        "mem-w-lint",
        "mem-w-port",
    }
    assert 'id="group-rule"' in dom and 'id="group-project"' in dom
    assert "<b>odd</b>" not in dom
    assert pager_info(dom) == ["第 1 / 1 页，第 1–10 条，共 10 条"] * 2

    data = png.read_bytes()
    assert len(data) > 20_000
    width, height, bpp, rows = decode_png(data)
    assert (width, height) == (1000, 1400)
    counts = colour_stats(rows, bpp)
    assert len(counts) > 50, "screenshot is (nearly) one colour"
    total = width * height
    background = max(counts.values())
    assert background < total * 0.9
    # The stylesheet applied: page background, the blue confidence bars, the grey deprecated card.
    assert counts.get((0xF6, 0xF8, 0xFA), 0) > total * 0.05
    assert counts.get((0x09, 0x69, 0xDA), 0) > 500
    assert counts.get((0xF3, 0xF4, 0xF6), 0) > 5_000
    # Dark glyph pixels: text was drawn, not only boxes.
    dark = sum(n for (r, g, b), n in counts.items() if r + g + b < 200)
    assert dark > 2_000


def test_chromium_harness_detects_a_script_that_runs(chromium: Path, tmp_path: Path) -> None:
    # Positive control: without escaping the same text would run, and the check above would see it.
    page = tmp_path / "unsafe.html"
    page.write_text(f"<!DOCTYPE html><title>原标题</title><p>{SCRIPT_TEXT}</p>", encoding="utf-8")
    dom, _ = run_chromium(chromium, page, tmp_path, width=400, height=300)
    assert parse(dom).title == "pwned"


def pager_info(dom: str) -> list[str]:
    return re.findall(r'<span class="info">([^<]*)</span>', dom)


def big_groups(count: int) -> dict[str, list[SimpleNamespace]]:
    """``count`` memories over the global scope and three workspaces, confidence descending by
    number within each scope and group, every tenth mentioning a word the search looks for."""
    groups: dict[str, list[SimpleNamespace]] = {"rule": [], "project": []}
    for number in range(count):
        group = "rule" if number % 5 == 0 else "project"
        where = number % 4
        scope = (
            {}
            if where == 0
            else {"workspace": f"/home/dev/code/svc-{where}", "workspaceName": f"svc-{where}"}
        )
        word = "灰度开关" if number % 10 == 3 else "普通事实"
        confidence = round(1.0 - number / (count * 2), 6)
        groups[group].append(
            mem(f"mem-{number:05d}", f"第 {number} 条 {word}", confidence, category=group, **scope)
        )
    return groups


def test_large_page_searches_and_pages_in_chromium(chromium: Path, tmp_path: Path) -> None:
    count = 4000
    page = tmp_path / "memories.html"
    page.write_text(render_html(big_groups(count), NOW), encoding="utf-8")
    expected = list(rows(page.read_text(encoding="utf-8")))  # page order: scope, group, confidence
    assert len(expected) == count

    # Unfiltered: the first 50 only, in page order, with the totals in the pager.
    dom, _ = run_chromium(chromium, page, tmp_path)
    cards = [c["id"] for c in parse(dom).cards]
    assert cards == expected[:50]
    assert pager_info(dom)[0] == f"第 1 / 80 页，第 1–50 条，共 {count} 条"

    # Page 3 in the fragment: memories 101 to 150, under the headings of their scope and group.
    dom, _ = run_chromium(chromium, page, tmp_path, fragment="#page=3")
    parsed = parse(dom)
    assert [c["id"] for c in parsed.cards] == expected[100:150]
    assert pager_info(dom)[0] == f"第 3 / 80 页，第 101–150 条，共 {count} 条"

    # A search (the word, percent-encoded as a browser writes it) and its second page.
    hits = [i for i in expected if int(i[4:]) % 10 == 3]
    dom, _ = run_chromium(chromium, page, tmp_path, fragment="#q=%E7%81%B0%E5%BA%A6%E5%BC%80%E5%85%B3&page=2")
    cards = [c["id"] for c in parse(dom).cards]
    assert cards == hits[50:100]
    assert all("灰度开关" in str(c["text"]) for c in parse(dom).cards)
    assert pager_info(dom)[0] == f"第 2 / 8 页，第 51–100 条，共 {len(hits)} 条"
    assert 'value="灰度开关"' in dom or "灰度开关" in dom

    # Scope and group filters: one workspace's project facts, last page, headed by that workspace.
    data = page_data(page.read_text(encoding="utf-8"))
    svc2 = [s[0] for s in data["scopes"]].index("/home/dev/code/svc-2")
    wanted = [r[0] for r in data["rows"] if r[7] == svc2 and r[8] == 1]
    last = -(-len(wanted) // 50)
    dom, _ = run_chromium(chromium, page, tmp_path, fragment=f"#scope={svc2}&group=1&page={last}")
    parsed = parse(dom)
    assert [c["id"] for c in parsed.cards] == wanted[(last - 1) * 50 :]
    assert {c["scope"] for c in parsed.cards} == {"/home/dev/code/svc-2"}
    assert [s["heading"] for s in parsed.scopes] == [f"svc-2/home/dev/code/svc-2{len(wanted)} 条"]

    # A search nothing matches says so; a page past the end shows the last one.
    dom, _ = run_chromium(chromium, page, tmp_path, fragment="#q=%3Cscript%3E")
    assert parse(dom).cards == [] and "没有匹配的记忆" in dom
    dom, _ = run_chromium(chromium, page, tmp_path, fragment="#page=999")
    assert [c["id"] for c in parse(dom).cards] == expected[-50:]


def test_empty_store_and_a_tampered_script_in_chromium(chromium: Path, tmp_path: Path) -> None:
    page = tmp_path / "memories.html"
    page.write_text(render_html({}, NOW), encoding="utf-8")
    dom, _ = run_chromium(chromium, page, tmp_path)
    assert dom.split("<script", 1)[0].count("（暂无）") == 2 and pager_info(dom)[0] == "没有匹配的记忆"
    # Control for the policy: the same page with one character of the script changed renders
    # nothing, because only the exact script's hash may run.
    html_text = render_html(sample_groups(), NOW)
    page.write_text(html_text.replace("SIZE = 50;", "SIZE = 51;"), encoding="utf-8")
    assert page.read_text(encoding="utf-8") != html_text
    dom, _ = run_chromium(chromium, page, tmp_path)
    assert parse(dom).cards == [] and pager_info(dom) == []
    page.write_text(html_text, encoding="utf-8")
    dom, _ = run_chromium(chromium, page, tmp_path)
    assert len(parse(dom).cards) == 7


# --- a store too large to embed whole ---------------------------------------------------------

PAY = {"workspace": "/srv/repos/pay", "workspaceName": "pay"}


def large_store_page(facts_count: int = 5000) -> tuple[str, dict[tuple[str, str], list[str]]]:
    """A store of ``facts_count`` facts (global and one workspace's) and 120 global rules (by
    default over the page's limit of 5,000 memories), its page as ``memself open`` writes it, and
    each (workspace, group)'s ids in page order."""
    from memself.page.listing import refresh_views
    from memself.store.records import sort_memories
    from tests.support.helpers import make_store, record, write_records

    store = make_store()
    start = datetime(2026, 11, 1, tzinfo=timezone.utc)
    facts = [
        record(
            f"p-{i:05d}",
            f"项目事实第 {i} 条",
            round(0.41 + (i % 59) / 100, 2),
            "project",
            last=start - timedelta(minutes=i),
            **(PAY if i % 5 < 2 else {}),
        )
        for i in range(facts_count)
    ]
    rules = [
        record(
            f"r-{i:03d}",
            f"规则第 {i} 条",
            round(0.5 + (i % 7) / 20, 2),
            "rule",
            last=start - timedelta(hours=i),
        )
        for i in range(120)
    ]
    write_records(store, "project", facts)
    write_records(store, "rule", rules)
    expected: dict[tuple[str, str], list[str]] = {}
    for memory in sort_memories(store.all()):
        expected.setdefault((memory.workspace, memory.category), []).append(memory.id)
    page = refresh_views(store.paths, NOW).read_text(encoding="utf-8")
    return page, expected


def test_a_store_over_the_limit_embeds_the_first_memories_of_each_group_and_says_where_the_rest_are() -> None:
    page, expected = large_store_page()
    data = page_data(page)
    assert [s[0] for s in data["scopes"]] == ["", "/srv/repos/pay"]
    # Each scope's groups: the first 50 in page order (confidence, then last activity), no more.
    ids = [r[0] for r in data["rows"]]
    assert (
        ids
        == expected[("", "rule")][:50]
        + expected[("", "project")][:50]
        + expected[(PAY["workspace"], "project")][:50]
    )
    # The counts are the store's, in the markup and in the data.
    assert "规则与偏好 <b>120</b> 条" in page and "项目事实 <b>5000</b> 条" in page
    overview = page.split('<ol class="scopes" id="scopes">', 1)[1].split("</ol>", 1)[0]
    assert (
        "规则与偏好 120 条，项目事实 3000 条" in overview and "规则与偏好 0 条，项目事实 2000 条" in overview
    )
    assert data["totals"] == [120, 3000, 0, 2000]
    # A truncated group says how many it has and how to see the others; the page says so on top.
    assert data["more"] == {
        "0": "这一组共 120 条，本页只收录了置信度最高的 50 条；全部记忆请用 memself list --all 查看。",
        "1": "这一组共 3000 条，本页只收录了置信度最高的 50 条；全部记忆请用 memself list --all 查看。",
        "3": "这一组共 2000 条，本页只收录了置信度最高的 50 条；"
        "全部记忆请用 memself list --all --workspace /srv/repos/pay 查看。",
    }
    assert (
        "记忆共 5120 条，本页只收录每个范围每一组置信度最高的 50 条（共 150 条），搜索也只在这些记忆里进行"
        in page
    )
    assert "<code>memself list --all</code>" in page


def test_a_store_at_the_limit_embeds_every_memory() -> None:
    page, expected = large_store_page(facts_count=5000 - 120)
    data = page_data(page)
    assert len(data["rows"]) == 5000 and "totals" not in data and "more" not in data
    assert {r[0] for r in data["rows"]} == {i for ids in expected.values() for i in ids}
    assert "本页只收录" not in page


def test_a_store_over_the_limit_in_chromium(chromium: Path, tmp_path: Path) -> None:
    page_text, expected = large_store_page()
    page = tmp_path / "memories.html"
    page.write_text(page_text, encoding="utf-8")
    dom, _ = run_chromium(chromium, page, tmp_path)
    parsed = parse(dom)
    assert [c["id"] for c in parsed.cards] == expected[("", "rule")][:50]
    # Headings count the store's memories; the truncated group ends with where the rest are.
    assert parsed.scopes[0]["heading"] == "所有项目3120 条"
    assert '<span class="count">120 条</span>' in dom
    shown = dom.split("<script", 1)[0]  # what the script rendered, not its data
    assert shown.count("这一组共") == 1
    note = "这一组共 120 条，本页只收录了置信度最高的 50 条；全部记忆请用 memself list --all 查看。"
    assert f'<p class="more">{note}</p>' in shown
    assert pager_info(dom)[0] == "第 1 / 3 页，第 1–50 条，本页收录 150 条"
    # The workspace's facts on the last page, its note after them.
    dom, _ = run_chromium(chromium, page, tmp_path, fragment="#page=3")
    assert [c["id"] for c in parse(dom).cards] == expected[(PAY["workspace"], "project")][:50]
    assert '<p class="more">这一组共 2000 条' in dom.split("<script", 1)[0]
    # A search runs over the memories the page holds and counts those.
    dom, _ = run_chromium(chromium, page, tmp_path, fragment="#q=%E8%A7%84%E5%88%99%E7%AC%AC%201")
    found = parse(dom).cards
    assert found and all(
        c["id"] in expected[("", "rule")][:50] and "规则第 1" in str(c["text"]) for c in found
    )
    assert "这一组共" not in dom.split("<script", 1)[0]
