"""memories.html: ordering, escaping, deprecation marks, atomic writes, and a real Chromium render."""

from __future__ import annotations

import os
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

import pytest

from memself import snapshot
from memself.paths import DataPaths
from memself.records import Memory
from memself.snapshot import render_html, write_snapshot

CHROMIUM = Path("/usr/bin/chromium")
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
    ids = [c["id"] for c in parse(render_html(groups, NOW)).cards]
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
    assert [c["id"] for c in parse(render_html(groups, NOW)).cards] == ["mem-b", "mem-a"]


def test_every_text_is_escaped_in_text_and_attributes() -> None:
    page = render_html(sample_groups(), NOW)
    parsed = parse(page)
    # Nothing the user wrote became markup: no script, no img, no b, no event handler anywhere.
    assert [t for t, _ in parsed.tags if t in {"script", "img", "marquee", "iframe"}] == []
    assert not [(t, k) for t, a in parsed.tags for k in a if k.startswith("on")]
    assert "<script>" not in page and "&lt;script&gt;" in page
    # ...and each string comes back verbatim as text or as the attribute value.
    by_id = {c["id"]: c for c in parsed.cards}
    assert SCRIPT_TEXT in str(by_id["mem-r-script"]["text"])
    assert QUOTE_ID in by_id
    assert QUOTE_EVIDENCE in str(by_id[QUOTE_ID]["text"])
    assert QUOTE_ID in str(by_id[QUOTE_ID]["text"])


def test_deprecated_memories_are_marked_and_counted() -> None:
    groups = sample_groups()
    # Confidence at the line without the flag (legacy data) counts as deprecated too.
    groups["project"].append(mem("mem-p-sunk", "置信度已经跌到零点四的事实", 0.4, category="project"))
    parsed = parse(render_html(groups, NOW))
    dead = {c["id"] for c in parsed.cards if "deprecated" in str(c["class"]).split()}
    assert dead == {"mem-r-old", "mem-p-sunk"}
    for card in parsed.cards:
        assert ("已废弃" in str(card["text"])) == (card["id"] in dead)
    page = render_html(groups, NOW)
    assert "规则与偏好 <b>5</b> 条（其中已废弃 1 条）" in page
    assert "项目事实 <b>3</b> 条（其中已废弃 1 条）" in page


def test_card_shows_id_confidence_local_times_and_evidence(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed = parse(render_html(sample_groups(), NOW))
    card = next(c for c in parsed.cards if c["id"] == "mem-r-commit")
    text = str(card["text"])
    assert "mem-r-commit" in text
    assert "1.00" in text
    assert "依据：用户说：改完别自动提交" in text
    # 08:00Z shown in the local zone (UTC+8), whatever zone the caller's `now` is in.
    assert "最近活跃2026-11-29 16:00 UTC+08:00" in text
    assert "创建2026-10-01 10:00 UTC+08:00" in text
    utc_now = NOW.astimezone(timezone.utc)
    assert "生成于 <time>2026-11-30 16:48 UTC+08:00</time>" in render_html(sample_groups(), utc_now)
    monkeypatch.setenv("TZ", "UTC0")
    time.tzset()
    utc_page = render_html(sample_groups(), NOW)
    assert "最近活跃</dt><dd>2026-11-29 08:00 UTC+00:00" in utc_page
    assert "生成于 <time>2026-11-30 08:48 UTC+00:00</time>" in utc_page


def test_odd_values_render_without_crashing() -> None:
    groups = {
        "rule": [
            mem("mem-odd", "时间和置信度都不规整", 1.15, last="not-a-time"),
            SimpleNamespace(id="mem-bare", text="只有最少字段的记录", confidence="x"),
        ]
    }
    parsed = parse(render_html(groups, NOW))
    text = {c["id"]: str(c["text"]) for c in parsed.cards}
    assert "1.15" in text["mem-odd"] and "not-a-time" in text["mem-odd"]
    assert "0.00" in text["mem-bare"] and "已废弃" in text["mem-bare"]
    page = render_html(groups, NOW)
    assert 'style="width:100%"' in page  # legacy > 1 does not overflow the bar


def test_empty_groups_and_self_contained() -> None:
    page = render_html({}, NOW)
    assert page.count("（暂无）") == 2
    assert "规则与偏好" in page and "项目事实" in page
    full = render_html(sample_groups(), NOW)
    parsed = parse(full)
    # Nothing that loads: no linking tags, no src/href attribute anywhere, no URLs in the CSS.
    assert not [t for t, _ in parsed.tags if t in {"link", "script", "img", "iframe", "object"}]
    assert not [(t, k) for t, a in parsed.tags for k in a if k in {"src", "href", "srcset"}]
    css = full[full.index("<style>") : full.index("</style>")].lower()
    for needle in ("http", "url(", "@import", "@font-face"):
        assert needle not in css, needle
    assert "default-src 'none'" in full and "Content-Security-Policy" in full


def test_memories_are_grouped_by_workspace() -> None:
    page = render_html(workspace_groups(), NOW)
    parsed = parse(page)
    assert [(s["workspace"], s["heading"]) for s in parsed.scopes] == [
        ("", "所有项目7 条"),
        ("/home/dev/<b>odd</b>", "<b>odd</b>/home/dev/<b>odd</b>1 条"),
        ("/home/dev/code/pay-service", "pay-service/home/dev/code/pay-service2 条"),
    ]
    scope_of = {c["id"]: c["scope"] for c in parsed.cards}
    assert {i for i, s in scope_of.items() if s} == {"mem-w-lint", "mem-w-port", "mem-w-odd"}
    assert scope_of["mem-w-lint"] == scope_of["mem-w-port"] == "/home/dev/code/pay-service"
    # Within a scope, each group in confidence order; the global groups keep their anchors.
    ids = [c["id"] for c in parsed.cards]
    assert ids.index("mem-w-lint") < ids.index("mem-w-port")
    assert 'id="group-rule"' in page and 'id="group-project"' in page
    assert "<b>odd</b>" not in page and "&lt;b&gt;odd&lt;/b&gt;" in page  # the odd name stayed text
    # Totals count every scope; a workspace's empty group is left out, the global ones stay.
    assert "规则与偏好 <b>6</b> 条（其中已废弃 1 条）" in page and "项目事实 <b>4</b> 条" in page
    assert "其中 <b>3</b> 条只属于某个项目（2 个项目）" in page
    assert page.count("（暂无）") == 0
    assert page.count("<h3>规则与偏好") == 2 and page.count("<h3>项目事实") == 3


def test_a_page_without_workspaces_has_only_the_global_section() -> None:
    page = render_html(sample_groups(), NOW)
    assert [s["workspace"] for s in parse(page).scopes] == [""]
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
    parsed = parse(render_html({"rule": [created], "project": [legacy]}, NOW))
    assert [c["id"] for c in parsed.cards] == [created.id, "mem-legacy1-abcdef"]
    assert "0.50" in str(parsed.cards[0]["text"])
    assert "旧版本留下的记录 <b>粗</b>" in str(parsed.cards[1]["text"])
    assert "已废弃" in str(parsed.cards[1]["text"])


def test_card_shows_applies_when_escaped() -> None:
    when = ("记一下取件时间", "<script>document.title='pwned'</script>")
    created = Memory.create("所有存库的时间一律使用 UTC", "rule", NOW, applies_when=when)
    page = render_html({"rule": [created]}, NOW)
    parsed = parse(page)
    assert [t for t, _ in parsed.tags if t == "script"] == []
    assert "适用场景：记一下取件时间；<script>document.title='pwned'</script>" in str(parsed.cards[0]["text"])
    bare = render_html({"rule": [Memory.create("回答一律使用中文", "rule", NOW)]}, NOW)
    assert "适用场景" not in bare.split("</style>", 1)[1]


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
    root = str(Path(snapshot.__file__).resolve().parent.parent)
    code = (
        f"import sys; sys.path.insert(0, {root!r}); import memself.snapshot; "
        "heavy = {'numpy', 'torch', 'sentence_transformers', 'httpx', 'mcp', 'click', 'jieba'}"
        "; print(sorted(heavy & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- real headless Chromium -----------------------------------------------------------------


def _has_cjk_font() -> bool:
    try:
        found = subprocess.run(
            ["fc-list", ":lang=zh"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return bool(found.stdout.strip())


@pytest.fixture(scope="module")
def chromium() -> Path:
    """Debian's Chromium and a CJK font (./scripts/test.sh installs both when it runs as root).
    Without them the screenshot tests are skipped, except in CI, where they must run."""
    missing = [
        what for what, ok in (("chromium", CHROMIUM.exists()), ("a CJK font", _has_cjk_font())) if not ok
    ]
    if missing:
        why = (
            f"{' and '.join(missing)} missing (./scripts/test.sh installs them when run as root with apt-get)"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI: the screenshot test must run, but {why}")
        pytest.skip(why)
    return CHROMIUM


def run_chromium(page: Path, workdir: Path, width: int = 1000, height: int = 1400) -> tuple[str, Path]:
    """Render ``page`` in headless Chromium; return the DOM after load and the screenshot."""
    png = workdir / "shot.png"
    env = dict(
        os.environ, XDG_CONFIG_HOME=str(workdir / "xdg-config"), XDG_CACHE_HOME=str(workdir / "xdg-cache")
    )
    cmd = [
        str(CHROMIUM),
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
        page.resolve().as_uri(),
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
    dom, png = run_chromium(page, tmp_path)

    parsed = parse(dom)
    # The injected script neither exists as an element nor ran (it would have set the title).
    assert parsed.title == "长期记忆快照"
    assert [t for t, _ in parsed.tags if t in {"script", "img", "marquee"}] == []
    assert "&lt;script&gt;document.title='pwned'&lt;/script&gt;" in dom
    by_id = {c["id"]: c for c in parsed.cards}
    assert SCRIPT_TEXT in str(by_id["mem-r-script"]["text"])
    assert QUOTE_EVIDENCE in str(by_id[QUOTE_ID]["text"])
    assert len(parsed.cards) == 10
    assert "已废弃" in str(by_id["mem-r-old"]["text"])
    # The browser's DOM keeps the grouping: global first, then each workspace with its path.
    scopes = [s["workspace"] for s in parsed.scopes]
    assert scopes == ["", "/home/dev/<b>odd</b>", "/home/dev/code/pay-service"]
    assert parsed.scopes[2]["heading"] == "pay-service/home/dev/code/pay-service2 条"
    assert {c["id"] for c in parsed.cards if c["scope"] == "/home/dev/code/pay-service"} == {
        "mem-w-lint",
        "mem-w-port",
    }
    assert "<b>odd</b>" not in dom

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
    dom, _ = run_chromium(page, tmp_path, width=400, height=300)
    assert parse(dom).title == "pwned"
