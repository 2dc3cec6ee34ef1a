"""memories.html: a self-contained page a human reads to check what memself remembers.

Memories are grouped by scope: first the global ones (every project sees them), then one section
per workspace with its name and path, each split into the two groups.

Standard library only: the store regenerates the page after every write, and the store is on the
hook path. The page loads nothing from the network (inline CSS, system fonts, no scripts), and a
Content-Security-Policy forbids scripts as a second line of defence behind the escaping: memory
texts come from users and from a judge model, so every one of them is untrusted.
"""

from __future__ import annotations

import contextlib
import html
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from memself.atomic import write_atomic
from memself.records import DEPRECATION_LINE, GROUP_LABELS, Memory
from memself.texts import SCOPE_GLOBAL
from memself.timeutil import parse_iso
from memself.workspaces import display_name

if TYPE_CHECKING:
    from memself.paths import DataPaths

GROUP_HINTS = {
    "rule": "会话开始时按置信度注入前 50 条有效规则；每轮输入时相关的规则还会再被召回。",
    "project": "只在每轮输入时按语义相关性召回，会话开始不注入。",
}
DEPRECATED_BADGE = "已废弃"
SCOPE_HINTS = {
    "global": "在每个项目里都会注入和召回。",
    "workspace": "只在这个项目里注入和召回，其他项目看不到。",
}

_CSS = """
:root { color-scheme: light; --ink: #1f2328; --muted: #656d76; --line: #d8dee4;
  --bg: #f6f8fa; --card: #ffffff; --accent: #0969da; --warn: #9a6700; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--ink);
  font: 15px/1.65 system-ui, -apple-system, "PingFang SC", "Hiragino Sans GB",
    "Microsoft YaHei", "Noto Sans CJK SC", "WenQuanYi Micro Hei", sans-serif; }
.wrap { max-width: 920px; margin: 0 auto; padding: 28px 24px 48px; }
header.top { border-bottom: 1px solid var(--line); padding-bottom: 14px; margin-bottom: 22px; }
h1 { font-size: 22px; margin: 0 0 6px; letter-spacing: .02em; }
.summary { margin: 0; color: var(--ink); }
.summary b { font-variant-numeric: tabular-nums; }
.summary .sep { color: var(--line); margin: 0 8px; }
.note { margin: 4px 0 0; color: var(--muted); font-size: 13px; }
section.scope { margin: 0 0 38px; }
section.group { margin: 0 0 26px; }
h2 { font-size: 19px; margin: 0 0 2px; display: flex; align-items: baseline; gap: 10px;
  flex-wrap: wrap; }
h2 code { font-size: 13px; font-weight: normal; color: var(--muted); }
h3 { font-size: 16px; margin: 14px 0 2px; display: flex; align-items: baseline; gap: 10px; }
h2 .count, h3 .count { font-size: 13px; font-weight: normal; color: var(--muted); }
section.workspace > h2 { border-top: 1px solid var(--line); padding-top: 18px; }
.hint { margin: 0 0 12px; color: var(--muted); font-size: 13px; }
ol.cards { list-style: none; margin: 0; padding: 0; display: grid; gap: 10px; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 8px;
  padding: 12px 16px; }
.head { display: flex; align-items: center; gap: 10px; font-size: 13px; }
.head .k { color: var(--muted); }
.conf { font-weight: 600; font-variant-numeric: tabular-nums; min-width: 2.6em; }
.bar { flex: 0 0 120px; height: 6px; background: #eaeef2; border-radius: 3px; overflow: hidden; }
.bar i { display: block; height: 100%; background: var(--accent); border-radius: 3px; }
.badge { font-size: 12px; padding: 0 8px; border-radius: 10px; border: 1px solid #d4a72c;
  color: var(--warn); background: #fff8c5; }
.text { margin: 6px 0 4px; font-size: 15.5px; white-space: pre-wrap; overflow-wrap: anywhere; }
.evidence, .when { margin: 0 0 6px; color: var(--muted); font-size: 13px; white-space: pre-wrap;
  overflow-wrap: anywhere; }
.facts { margin: 0; display: flex; flex-wrap: wrap; gap: 2px 18px; color: var(--muted);
  font-size: 12px; }
.facts div { display: flex; gap: 6px; }
.facts dt { margin: 0; }
.facts dd { margin: 0; color: var(--ink); }
code { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: 12px;
  overflow-wrap: anywhere; }
.card.deprecated { background: #f3f4f6; border-style: dashed; }
.card.deprecated .text, .card.deprecated .conf { color: #8c959f; }
.card.deprecated .text { text-decoration: line-through; text-decoration-color: #c4cad0; }
.card.deprecated .bar i { background: #afb8c1; }
.empty { color: var(--muted); margin: 0; }
footer { color: var(--muted); font-size: 12px; border-top: 1px solid var(--line);
  padding-top: 10px; }
"""


def render_html(groups: Mapping[str, Sequence[Memory]], now: datetime) -> str:
    """The whole page for ``groups``, stamped as generated at ``now`` (aware)."""
    # Known groups first, in the records module's order, then any other the files hold.
    order = [g for g in GROUP_LABELS] + [g for g in groups if g not in GROUP_LABELS]
    sorted_groups = {g: _sorted(groups.get(g, ())) for g in order}
    summary = '<span class="sep">|</span>'.join(_summary_item(g, mems) for g, mems in sorted_groups.items())
    scopes = _by_scope(sorted_groups)
    owned = sum(len(ms) for key, _, by_group in scopes if key for ms in by_group.values())
    if owned:
        summary += (
            f'<span class="sep">|</span>其中 <b>{owned}</b> 条只属于某个项目（{len(scopes) - 1} 个项目）'
        )
    sections = "\n".join(
        _scope_section(number, key, name, by_group) for number, (key, name, by_group) in enumerate(scopes)
    )
    stamp = _e(_fmt_time(now))
    return f"""<!DOCTYPE html>
<html lang="zh-CN">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="memself">
<title>长期记忆快照</title>
<style>{_CSS}</style>
</head>
<body>
<div class="wrap">
<header class="top">
<h1>长期记忆快照</h1>
<p class="summary">{summary}<span class="sep">|</span>生成于 <time>{stamp}</time></p>
<p class="note">本页由 memself 在每次记忆变更后自动生成，手动修改会被覆盖。\
增删改请用 <code>memself</code> 命令或在对话里让助手整理。</p>
</header>
<main>
{sections}
</main>
<footer>置信度范围 0 到 1：新建 0.5，强化或合并 +0.1，召回注入 +0.05；\
闲置满 decayDays 天扣 0.05，降到 0.4 及以下标记为已废弃，不再注入和召回。</footer>
</div>
</body>
</html>
"""


def write_snapshot(paths: DataPaths, groups: Mapping[str, Sequence[Memory]], now: datetime) -> Path:
    """Atomically (re)write ``memories.html``; the original's ``memories.md`` goes away with it."""
    paths.ensure()
    target = paths.html
    write_atomic(target, render_html(groups, now))
    # The original stopped updating memories.md; a stale copy would mislead whoever opens it.
    with contextlib.suppress(FileNotFoundError):
        paths.legacy_markdown.unlink()
    return target


def _e(value: object) -> str:
    """Escape for text and for double- or single-quoted attributes alike."""
    return html.escape("" if value is None else str(value), quote=True)


def _confidence(mem: object) -> float:
    raw = getattr(mem, "confidence", 0.0)
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return 0.0
    return value if value == value else 0.0  # NaN sorts and renders as 0


def _last_active(mem: object) -> str:
    last = getattr(mem, "lastSeen", "") or getattr(mem, "createdAt", "")
    return last if isinstance(last, str) else ""


def _is_deprecated(mem: object) -> bool:
    # Same line the recall path uses: a flag, or a confidence that already sank to 0.4.
    return getattr(mem, "deprecated", False) is True or _confidence(mem) <= DEPRECATION_LINE


def _sorted(memories: Iterable[Memory]) -> list[Memory]:
    """Confidence desc, ties by last activity desc (ISO strings compare chronologically)."""
    by_time = sorted(memories, key=_last_active, reverse=True)
    return sorted(by_time, key=lambda m: round(_confidence(m), 10), reverse=True)


def _fmt_conf(value: float) -> str:
    return f"{value:.2f}"


def _fmt_time(raw: object) -> str:
    """A stored ISO time shown in the user's local zone; anything unparseable is shown as it is.

    Local like the daily cap and maintenance (``timeutil.local_day``): callers often pass a UTC
    ``now``, and a UTC clock reads wrong to a user in UTC+8.
    """
    parsed = raw if isinstance(raw, datetime) else parse_iso(raw)
    if parsed is None:
        return str(raw) if raw else "—"
    local = parsed.astimezone()
    offset = local.strftime("%z")
    zone = f"UTC{offset[:3]}:{offset[3:]}" if offset else ""
    return f"{local:%Y-%m-%d %H:%M} {zone}".strip()


def _label(group: str) -> str:
    return GROUP_LABELS.get(group, group)


def _summary_item(group: str, memories: Sequence[Memory]) -> str:
    dead = sum(1 for m in memories if _is_deprecated(m))
    tail = f"（其中{DEPRECATED_BADGE} {dead} 条）" if dead else ""
    return f"{_e(_label(group))} <b>{len(memories)}</b> 条{tail}"


def _workspace(mem: object) -> tuple[str, str]:
    """A record's workspace key and name ("" for a global one; duck-typed records have none)."""
    key = getattr(mem, "workspace", "")
    if not isinstance(key, str) or not key:
        return "", ""
    name = getattr(mem, "workspaceName", "")
    return key, name if isinstance(name, str) and name else display_name(key)


def _by_scope(
    groups: Mapping[str, list[Memory]],
) -> list[tuple[str, str, dict[str, list[Memory]]]]:
    """(key, name, memories per group) per scope: global first (always, even empty), then each
    workspace by name and path; every list keeps the order it had."""
    names: dict[str, str] = {"": ""}
    scoped: dict[str, dict[str, list[Memory]]] = {"": {g: [] for g in groups}}
    for group, memories in groups.items():
        for mem in memories:
            key, name = _workspace(mem)
            names.setdefault(key, name)
            scoped.setdefault(key, {g: [] for g in groups})[group].append(mem)
    keys = sorted(names, key=lambda k: (k != "", names[k].casefold(), k))
    return [(key, names[key], scoped[key]) for key in keys]


def _scope_section(number: int, key: str, name: str, groups: Mapping[str, Sequence[Memory]]) -> str:
    total = sum(len(ms) for ms in groups.values())
    count = f'<span class="count">{total} 条</span>'
    if not key:
        # The global groups keep the ids the page had before workspaces existed.
        inner = "\n".join(_section(g, ms, f"group-{g}", "h3") for g, ms in groups.items())
        return (
            f'<section class="scope global" id="scope-global">\n<h2>{_e(SCOPE_GLOBAL)}{count}</h2>\n'
            f'<p class="hint">{_e(SCOPE_HINTS["global"])}</p>\n{inner}\n</section>'
        )
    # A workspace has at least one memory; its empty groups are left out.
    inner = "\n".join(_section(g, ms, f"scope-{number}-{g}", "h3") for g, ms in groups.items() if ms)
    return (
        f'<section class="scope workspace" id="scope-{number}" data-workspace="{_e(key)}">\n'
        f"<h2>{_e(name)}<code>{_e(key)}</code>{count}</h2>\n"
        f'<p class="hint">{_e(SCOPE_HINTS["workspace"])}</p>\n{inner}\n</section>'
    )


def _section(group: str, memories: Sequence[Memory], anchor: str, heading: str) -> str:
    hint = GROUP_HINTS.get(group, "")
    hint_html = f'<p class="hint">{_e(hint)}</p>\n' if hint else ""
    if memories:
        body = '<ol class="cards">\n' + "\n".join(_card(m) for m in memories) + "\n</ol>"
    else:
        body = '<p class="empty">（暂无）</p>'
    return (
        f'<section class="group" id="{_e(anchor)}">\n'
        f'<{heading}>{_e(_label(group))}<span class="count">{len(memories)} 条</span></{heading}>\n'
        f"{hint_html}{body}\n</section>"
    )


def _card(mem: Memory) -> str:
    conf = _confidence(mem)
    dead = _is_deprecated(mem)
    width = max(0.0, min(conf, 1.0)) * 100
    badge = f' <span class="badge">{DEPRECATED_BADGE}</span>' if dead else ""
    evidence = getattr(mem, "evidence", "")
    evidence_html = f'\n<p class="evidence">依据：{_e(evidence)}</p>' if evidence else ""
    requests = getattr(mem, "appliesWhen", ())
    if requests and isinstance(requests, (list, tuple)):
        evidence_html += f'\n<p class="when">适用场景：{_e("；".join(map(str, requests)))}</p>'
    mem_id = getattr(mem, "id", "")
    facts = [
        ("ID", f"<code>{_e(mem_id)}</code>"),
        ("最近活跃", _e(_fmt_time(_last_active(mem)))),
        ("创建", _e(_fmt_time(getattr(mem, "createdAt", "")))),
    ]
    facts_html = "".join(f"<div><dt>{k}</dt><dd>{v}</dd></div>" for k, v in facts)
    return (
        f'<li class="card{" deprecated" if dead else ""}" data-id="{_e(mem_id)}">\n'
        f'<div class="head"><span class="k">置信度</span>'
        f'<span class="conf">{_fmt_conf(conf)}</span>'
        f'<span class="bar"><i style="width:{width:.0f}%"></i></span>{badge}</div>\n'
        f'<p class="text">{_e(getattr(mem, "text", ""))}</p>{evidence_html}\n'
        f'<dl class="facts">{facts_html}</dl>\n</li>'
    )
