"""memories.html: a self-contained page a human reads to check what memself remembers.

Memories are grouped by scope: first the global ones (every project sees them), then one section
per workspace with its name and path, each split into the two groups.

The page is generated when someone looks at it and, debounced, by the engine after writes (never
on the write itself). The memories travel as one JSON data block and a small inline script
(``snapshot_assets``) renders one page of the current search at a time. A store too large to
embed whole (``memself.page.listing.FULL_PAGE_MAX``) gets a page of the first memories of each
scope's groups with the store's counts (``Totals``): each group cut short says how many it has and
which command lists the rest, so generating the page costs what it shows, not what is stored.
Standard library only. The page loads nothing from the network (inline CSS, system fonts, one
inline script), and its Content-Security-Policy allows only that script, by hash, as a second line
of defence behind the escaping: memory texts come from users and from a judge model, so every one
of them is untrusted.
"""

from __future__ import annotations

import contextlib
import html
import json
import shlex
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from memself.atomic import write_atomic
from memself.kept.counts import advice
from memself.page.assets import CSP, CSS, SCRIPT
from memself.store.records import DEPRECATION_LINE, GROUP_LABELS, Memory
from memself.store.workspaces import display_name
from memself.text.messages import SCOPE_GLOBAL
from memself.timeutil import parse_iso

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
    "team": "团队记忆：这个仓库的 .memself/ 携带，只读，只在这个仓库里注入和召回；其余范围都是本机记忆。",
}
TEAM_SCOPE = "团队："

# What a page that does not embed every memory is told of the store: per (group, workspace key,
# "" global), how many memories it holds and how many of them are deprecated.
Totals = Mapping[tuple[str, str], tuple[int, int]]


def render_html(
    groups: Mapping[str, Sequence[Memory]],
    now: datetime,
    usage: Sequence[str] | None = None,
    team: Sequence[Memory] = (),
    totals: Totals | None = None,
) -> str:
    """The whole page for ``groups``, stamped as generated at ``now`` (aware); ``usage``: the
    lines of ``memself stats`` (``texts.stats_lines``), shown under the overview; ``team``: the
    memories repositories carry in ``.memself/`` (``memself.store.team``), one scope per
    repository after the user's own, marked as the team's; ``totals``: the store's counts when
    ``groups`` holds only the first memories of each scope's groups (every scope with a memory
    must have at least one there)."""
    # Known groups first, in the records module's order, then any other the files hold.
    order = [g for g in GROUP_LABELS] + [g for g in groups if g not in GROUP_LABELS]
    sorted_groups = {g: _sorted(groups.get(g, ())) for g in order}
    scopes = _by_scope(sorted_groups) + _team_scopes(team, order)
    counts = _Counts(totals)
    summary = '<span class="sep">|</span>'.join(
        _summary_item(g, counts.group(g, mems)) for g, mems in sorted_groups.items()
    )
    own = [s for s in scopes if not _is_team_scope(s[1])]
    owned = sum(counts.of(key, g, ms) for key, _, by_group in own if key for g, ms in by_group.items())
    if owned:
        summary += f'<span class="sep">|</span>其中 <b>{owned}</b> 条只属于某个项目（{len(own) - 1} 个项目）'
    if team:
        summary += (
            f'<span class="sep">|</span>另有仓库 .memself/ 携带的团队记忆 <b>{len(team)}</b> 条（只读）'
        )
    stamp = _e(_fmt_time(now))
    return f"""<!DOCTYPE html>
<html lang="zh-CN">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="memself">
<title>长期记忆快照</title>
<style>{CSS}</style>
</head>
<body>
<div class="wrap">
<header class="top">
<h1>长期记忆快照</h1>
<p class="summary">{summary}<span class="sep">|</span>生成于 <time>{stamp}</time></p>
<p class="note">本页在打开时（<code>memself open</code>，或让助手打开）生成；召回引擎在运行时，\
记忆变更后片刻也会在后台重新生成。生成之后的变更要重新生成才会显示。手动修改会被覆盖，\
增删改请用 <code>memself</code> 命令或在对话里让助手整理。</p>
{_partial_note(counts, scopes)}
{_scope_overview(scopes, order, counts)}
{_usage(usage)}
</header>
{_controls(scopes, order)}
<main id="list"><noscript><p class="empty">\
本页用一小段内嵌脚本分页显示记忆，请允许脚本运行。</p></noscript></main>
<nav class="pager" id="pager-bottom"></nav>
<footer>置信度范围 0 到 1：新建 0.5，强化或合并 +0.1，召回注入 +0.05；\
闲置满 decayDays 天扣 0.05，降到 0.4 及以下标记为已废弃，不再注入和召回。</footer>
</div>
<script type="application/json" id="memself-data">{_data_json(scopes, order, counts)}</script>
<script>{SCRIPT}</script>
</body>
</html>
"""


def write_snapshot(
    paths: DataPaths,
    groups: Mapping[str, Sequence[Memory]],
    now: datetime,
    team: Sequence[Memory] = (),
    totals: Totals | None = None,
) -> Path:
    """Atomically (re)write ``memories.html``; the original's ``memories.md`` goes away with it.
    With ``totals`` (``groups`` is not the whole store) the usage section, which needs every
    memory's counts, is left to ``memself stats``."""
    from memself.kept.stats import load_stats
    from memself.text.messages import stats_lines

    paths.ensure()
    target = paths.html
    usage: list[str] | None = None
    if totals is None:
        stats = load_stats(paths, [m for ms in groups.values() for m in ms if isinstance(m, Memory)])
        # Before any checked turn the page stays as it was: the section would only say "nothing yet".
        counted = stats["turns"] or stats["shownMost"] or stats["brokenMost"]
        usage = stats_lines(stats) if counted else None
    write_atomic(target, render_html(groups, now, usage, team, totals))
    # The original stopped updating memories.md; a stale copy would mislead whoever opens it.
    with contextlib.suppress(FileNotFoundError):
        paths.legacy_markdown.unlink()
    return target


def _usage(lines: Sequence[str] | None) -> str:
    """The usage section: every line escaped, nested lines as a list under their heading."""
    if not lines:
        return ""
    items = "".join(f"<li>{_e(line.strip())}</li>" for line in lines)
    return f'<details class="usage"><summary>使用情况（memself stats）</summary><ul>{items}</ul></details>'


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


class _Counts:
    """How many memories a scope's group holds: the store's count (``Totals``) when the page
    embeds only the first ones, else the memories given."""

    def __init__(self, totals: Totals | None) -> None:
        self.totals = totals

    @property
    def partial(self) -> bool:
        return self.totals is not None

    def of(self, key: str, group: str, memories: Sequence[Memory]) -> int:
        if self.totals is None or (group, key) not in self.totals:
            return len(memories)
        return self.totals[(group, key)][0]

    def group(self, group: str, memories: Sequence[Memory]) -> tuple[int, int]:
        """(memories, deprecated ones) of a group over the user's own scopes."""
        if self.totals is None:
            return len(memories), sum(1 for m in memories if _is_deprecated(m))
        found = [n for (g, _), n in self.totals.items() if g == group]
        return sum(n for n, _ in found), sum(d for _, d in found)


def _summary_item(group: str, counted: tuple[int, int]) -> str:
    count, dead = counted
    tail = f"（其中{DEPRECATED_BADGE} {dead} 条）" if dead else ""
    return f"{_e(_label(group))} <b>{count}</b> 条{tail}"


def _list_command(key: str) -> str:
    """The command that lists every memory a scope's session sees."""
    return "memself list --all" + (f" --workspace {shlex.quote(key)}" if key else "")


def _more_text(key: str, total: int, shown: int) -> str:
    return (
        f"这一组共 {total} 条，本页只收录了置信度最高的 {shown} 条；全部记忆请用 {_list_command(key)} 查看。"
    )


def _partial_note(counts: _Counts, scopes: Sequence[tuple[str, str, Mapping[str, Sequence[Memory]]]]) -> str:
    """On a page that embeds only the first memories of each group: how many the store holds and
    how to see the rest (plain markup, readable where scripts do not run)."""
    if not counts.partial:
        return ""
    own = [s for s in scopes if not _is_team_scope(s[1])]
    total = sum(counts.of(key, g, ms) for key, _, by_group in own for g, ms in by_group.items())
    shown = sum(len(ms) for _, _, by_group in own for ms in by_group.values())
    most = max((len(ms) for _, _, by_group in own for ms in by_group.values()), default=0)
    return (
        f'<p class="note partial">记忆共 {total} 条，本页只收录每个范围每一组置信度最高的 {most} 条'
        f"（共 {shown} 条），搜索也只在这些记忆里进行。查看全部记忆请用 <code>memself list --all</code>，"
        "只看一个项目加 <code>--workspace 项目目录</code>；使用情况请用 <code>memself stats</code> 查看。</p>"
    )


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


def _team_scopes(
    team: Sequence[Memory], order: Sequence[str]
) -> list[tuple[str, str, dict[str, list[Memory]]]]:
    """One scope per repository whose ``.memself/`` carries memories: its key is that folder,
    its name says it is the team's."""
    scoped: dict[str, dict[str, list[Memory]]] = {}
    names: dict[str, str] = {}
    for mem in team:
        key = f"{mem.workspace}/.memself"
        names.setdefault(key, TEAM_SCOPE + (mem.workspaceName or display_name(mem.workspace)))
        scoped.setdefault(key, {g: [] for g in order}).setdefault(mem.category, []).append(mem)
    return [(key, names[key], {g: _sorted(ms) for g, ms in scoped[key].items()}) for key in sorted(scoped)]


def _is_team_scope(name: str) -> bool:
    return name.startswith(TEAM_SCOPE)


def _scope_hint(key: str, name: str) -> str:
    if _is_team_scope(name):
        return SCOPE_HINTS["team"]
    return SCOPE_HINTS["workspace" if key else "global"]


def _scope_overview(
    scopes: Sequence[tuple[str, str, Mapping[str, Sequence[Memory]]]], order: Sequence[str], tally: _Counts
) -> str:
    """Counts per scope and group, as plain markup: readable even where scripts do not run."""
    items = []
    for number, (key, name, by_group) in enumerate(scopes):
        label = _e(SCOPE_GLOBAL) if not key else f"{_e(name)}<code>{_e(key)}</code>"
        counts = "，".join(f"{_e(_label(g))} {tally.of(key, g, by_group.get(g, ()))} 条" for g in order)
        items.append(
            f'<li data-scope="{number}"><span class="name">{label}</span>'
            f'<span class="count">{counts}</span></li>'
        )
    return '<ol class="scopes" id="scopes">\n' + "\n".join(items) + "\n</ol>"


def _controls(scopes: Sequence[tuple[str, str, Mapping[str, Sequence[Memory]]]], order: Sequence[str]) -> str:
    scope_options = "".join(
        f'<option value="{number}">{_e(name or SCOPE_GLOBAL)}</option>'
        for number, (_, name, _) in enumerate(scopes)
    )
    group_options = "".join(
        f'<option value="{number}">{_e(_label(g))}</option>' for number, g in enumerate(order)
    )
    return (
        '<div class="controls" id="controls" hidden>\n'
        '<input type="search" id="q" placeholder="搜索记忆的文字、依据、适用场景或 ID" autocomplete="off">\n'
        f'<select id="scope"><option value="">全部范围</option>{scope_options}</select>\n'
        f'<select id="group"><option value="">全部分组</option>{group_options}</select>\n'
        '</div>\n<nav class="pager" id="pager-top"></nav>'
    )


def _data_json(
    scopes: Sequence[tuple[str, str, Mapping[str, Sequence[Memory]]]], order: Sequence[str], counts: _Counts
) -> str:
    """Every memory given as one row of a JSON array, in page order (scope, group, confidence).

    A row: id, text, confidence, last activity, creation time, evidence, applies-when (joined),
    scope number, group number, deprecated (0/1), advice ("" or the often-broken advice). Times
    stay as stored: the page shows them in the reader's zone. ``<``, ``>`` and ``&`` are written
    as JSON escapes, so no memory text can close the data block or open markup; the script only
    ever puts them in as text.

    A page that embeds only the first memories of each group also carries ``totals`` (the store's
    count per scope and group, scope-major) and ``more`` (per truncated group, by the same index
    as a string, what it says after its last memory).
    """
    rows: list[list[object]] = []
    for number, (_, _, by_group) in enumerate(scopes):
        for group_number, group in enumerate(order):
            for mem in by_group.get(group, ()):
                requests = getattr(mem, "appliesWhen", ())
                when = "；".join(map(str, requests)) if isinstance(requests, (list, tuple)) else ""
                rows.append(
                    [
                        _str(getattr(mem, "id", "")),
                        _str(getattr(mem, "text", "")),
                        round(_confidence(mem), 6),
                        _last_active(mem),
                        _str(getattr(mem, "createdAt", "")),
                        _str(getattr(mem, "evidence", "")),
                        when,
                        number,
                        group_number,
                        int(_is_deprecated(mem)),
                        advice(mem) if isinstance(mem, Memory) else "",
                    ]
                )
    data: dict[str, object] = {
        "scopes": [[key, name or SCOPE_GLOBAL, _scope_hint(key, name)] for key, name, _ in scopes],
        "groups": [[g, _label(g), GROUP_HINTS.get(g, "")] for g in order],
        "badge": DEPRECATED_BADGE,
        "rows": rows,
    }
    if counts.partial:
        totals: list[int] = []
        more: dict[str, str] = {}
        for key, _, by_group in scopes:
            for group in order:
                shown = by_group.get(group, ())
                total = counts.of(key, group, shown)
                if total > len(shown):
                    more[str(len(totals))] = _more_text(key, total, len(shown))
                totals.append(total)
        data["totals"], data["more"] = totals, more
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def _str(value: object) -> str:
    return "" if value is None else str(value)
