"""Every text the hooks show a host's model or its user, in one place to read and review together.

Session start, the per-prompt recall block, the result lines after a write (also what
``memory_resolve`` answers) and the Stop continuation with its confirmation popup. Chinese, as in
the original. ``own_memory`` names the host's own memory (``HostAdapter.OWN_MEMORY``) when it has
one: the wording then constrains only this plugin and does not ask the model to set that memory
aside. Memory texts are always quoted through ``inert``. Standard library only: the hook renders
these.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memself.store.records import (
    GLOBAL,
    GROUP_LABELS,
    GROUP_SHORT_LABELS,
    GROUPS,
    MAX_TEXT,
    TEAM,
    WORKSPACE,
    Memory,
    fmt_confidence,
    one_line,
    read_applies_when,
    read_scope,
)
from memself.store.workspaces import display_name
from memself.text.fold import Folded, fold

# The first line of every Stop continuation the user sees, and the marker that opens every
# instruction the plugin gives the model: the input filter skips prompts that carry them.
NOTICE_HEADER = "memory-self-evolution 捕捉到了新的记忆："
CONFIRM_MARKER = "MEMORY_CONFIRM_V1"
# The MCP tool the popup's answer goes through; the MCP server registers it under this name.
RESOLVE_TOOL = "memory_resolve"

SESSION_RULE_LIMIT = 50
SESSION_HEADER = "# 长期记忆（自动生成，请勿手动编辑）"
# Rules a repository carries in .memself/rule.jsonl: the team's, read-only, this repository only.
TEAM_MARK = "［团队］"  # a recalled memory the repository carries
TEAM_RULES_TITLE = "## 团队规则（本仓库 .memself/rule.jsonl 携带，只读，仅在本仓库生效，共 {count} 条）"

BOUNDARY = (
    "记忆由 memory-self-evolution 插件在后台自动提取、判重和沉淀，包括用户明确要求「记住」的情况。"
    "你专注当前任务：不要自己判断是否该记，不要判重、改写或写入记忆，也不要发起记忆确认；"
    "只有收到含 MEMORY_CONFIRM_V1 的插件指令时，才按指令执行，不重新判断或改写提案。"
    "下面的规则仍然必须遵守。"
)
BOUNDARY_PLUGIN_SCOPED = (
    "memory-self-evolution 插件的记忆由它在后台自动提取、判重和沉淀，包括用户明确要求「记住」的情况。"
    "对这个插件的记忆，你不需要判断是否该记，不要调用它的写工具，也不要替它发起记忆确认；"
    "只有收到含 MEMORY_CONFIRM_V1 的插件指令时，才按指令执行，不重新判断或改写提案。"
    "这些约束只针对本插件，不影响 {own_memory} 自带的记忆。下面的规则仍然必须遵守。"
)

REMINDER = (
    "记忆由 memory-self-evolution 插件在后台判断。用户陈述偏好、规范或要求记住时，你只需回应并照做："
    f"不要判断是否该记，不要调用提问工具发起「检测到一条记忆」确认，也不要主动调用 {RESOLVE_TOOL} "
    "或其它记忆写工具。只有收到含 MEMORY_CONFIRM_V1 的插件指令时，才按指令弹窗并处理对应 sessionID。"
)
REMINDER_PLUGIN_SCOPED = (
    "memory-self-evolution 插件的记忆由它在后台判断。用户陈述偏好、规范或要求记住时，就这个插件而言你只需"
    "回应并照做：不要替它判断是否该记，不要调用提问工具发起「检测到一条记忆」确认，也不要主动调用 "
    f"{RESOLVE_TOOL} 或它的其它记忆写工具。只有收到含 MEMORY_CONFIRM_V1 的插件指令时，才按指令弹窗并处理"
    "对应 sessionID。这些约束只针对本插件，不影响 {own_memory} 自带的记忆。"
)

DEPOSITION_OFF = (
    "记忆沉淀未启用：memory-self-evolution 插件的旁路判别接口没有配齐（config.json 的 sideApiBase、"
    "sideApiModel 和 side-secret.json 的 apiKey），已有记忆照常注入和召回，但不会记下新内容。"
    "用户陈述偏好、规范或要求记住时，请如实告诉用户这句话不会被记下。"
    '启用方法：在终端运行 memself setup 填写判别接口；急用时可以运行 memself rule add "<规则>" '
    '或 memself project add "<项目事实>" 直接写入。'
)
DEPOSITION_OFF_LEGACY = (
    "记忆沉淀未启用：memory-self-evolution 插件的配置还停在旧版本的阻塞模式（sideJudge=false），"
    "阻塞模式已经移除，已有记忆照常注入和召回，但不会记下新内容。"
    "用户陈述偏好、规范或要求记住时，请如实告诉用户这句话不会被记下。"
    "启用方法：在终端运行 memself setup sidepath 改走旁路判别，然后重启客户端；"
    '急用时可以运行 memself rule add "<规则>" 直接写入。'
)

# The endpoint and the key file are named, never their contents: a hand-edited address is not
# text the model should read, let alone repeat to the user as something to run.
DEPOSITION_PAUSED_ENDPOINT = (
    "记忆沉淀已暂停：memory-self-evolution 插件 config.json 里的判别接口地址（sideApiBase）"
    "不是录入 apiKey 时的那个地址，可能被改动过。为防止密钥和对话被发往别处，插件没有发送任何请求，"
    "在用户重新输入 apiKey 之前不会记下新内容；已有记忆照常注入和召回。"
    "用户陈述偏好、规范或要求记住时，请如实告诉用户这句话不会被记下，并请用户亲自核对地址："
    "确认新地址可信后，在终端运行 memself key set 重新输入 apiKey 即可恢复；"
    "地址不是自己改的，就运行 memself setup 重新填写判别接口。"
)
DEPOSITION_PAUSED_UNCONFIRMED = (
    "记忆沉淀已暂停：memory-self-evolution 插件的接口密钥 side-secret.json 是原插件的格式，还没有确认"
    "可以发往哪个判别接口地址（sideApiBase）。为防止密钥和对话被发往别处，插件没有发送任何请求，"
    "在用户确认地址之前不会记下新内容；已有记忆照常注入和召回。"
    "用户陈述偏好、规范或要求记住时，请如实告诉用户这句话不会被记下，并请用户亲自核对地址："
    "在终端运行 memself doctor，按提示确认地址即可恢复；也可以运行 memself key set 重新输入 apiKey。"
)
DEPOSITION_KEY_INVALID = (
    "记忆沉淀已暂停：memory-self-evolution 插件的接口密钥文件 side-secret.json 无法读取或内容无效"
    "（可能是磁盘写满时留下的空文件），已有记忆照常注入和召回，但不会记下新内容。"
    "用户陈述偏好、规范或要求记住时，请如实告诉用户这句话不会被记下，"
    "并请用户在终端运行 memself key set 重新输入 apiKey（memself doctor 会说明文件哪里不对）。"
)
DEPOSITION_SECRET_BROKEN = (
    "记忆沉淀已暂停：memory-self-evolution 插件的本地会话密钥 session-secret 无效，也无法重新生成"
    "（可能磁盘已满或数据目录不可写），已有记忆照常注入和召回，但不会记下新内容。"
    "用户陈述偏好、规范或要求记住时，请如实告诉用户这句话不会被记下，"
    "并请用户腾出磁盘空间或检查数据目录的权限，然后运行 memself doctor 确认；之后的提问会自动恢复。"
)
SECRET_REPAIRED = (
    "注意：memory-self-evolution 插件的本地会话密钥 session-secret 内容无效（可能是上次写入时磁盘已满），"
    "已把它另存为 session-secret.invalid-* 并重新生成，记忆沉淀照常进行；之前等待确认的记忆提案随之失效。"
    "请用一句话把这件事告诉用户，详情可以运行 memself doctor 查看。"
)
_DEPOSITION_NOTICES = {
    "off": DEPOSITION_OFF,
    "legacy": DEPOSITION_OFF_LEGACY,
    "paused-endpoint": DEPOSITION_PAUSED_ENDPOINT,
    "paused-unconfirmed": DEPOSITION_PAUSED_UNCONFIRMED,
    "key-invalid": DEPOSITION_KEY_INVALID,
    "secret-broken": DEPOSITION_SECRET_BROKEN,
}

RECALL_HEADER = "# 与本轮输入相关的长期记忆（自动召回）"
RECALL_FOOTER = "以上为系统按相关性自动召回：规则需要遵守，项目事实供本轮参考。"

# What replaces the plugin's own confirm marker and notice header inside a memory's text.
MARKER_STANDIN = "〔插件标记已隐去〕"
NOTICE_STANDIN = "〔插件通知标题已隐去〕"


@dataclass(frozen=True)
class RecallHit:
    text: str
    score: float
    confidence: float


# The checks below read a line folded (``textfold``): look-alike letters, digits, colons, dashes
# and angle brackets as what they pass for, marks and variation selectors gone.
# The confirm marker however it is spelled, spaced or punctuated (a model reads them all alike).
_MARKER = re.compile(r"memory[\W_]*confirm[\W_]*v[\W_]*1", re.IGNORECASE)
_NOTICE = re.compile(r"memory[\W_]*self[\W_]*evolution\s*捕捉到了新的[记記][忆憶]\s*[:：]?", re.IGNORECASE)
# "<" opening anything a model or a host could take for markup: a tag (any letters, CJK too),
# a closing tag, a comment or declaration, a processing instruction, a chat-template token.
_TAG = re.compile(r"<(?=\s*(?:[/!?|]|[^\W\d_]))([^<>]*)(>?)")
# A look-alike bracket (‹ 〈 ﹤ ❮ ...) opens a tag only before a Latin name or [/!?|]: 〈静夜思〉
# and the like are ordinary Chinese.
_ANGLE_OPENERS = "<＜﹤"
_LATIN_TAG = re.compile(r"\s*(?:[/!?|]|[A-Za-z])")
# A speaker label: "Human:", "SYSTEM：", "用户：", "系統：", "ユーザー：" ... (and the popup's own
# "sessionID："), after folding, so "Ѕystem꞉" and "Ｈｕｍａｎ﹕" are labels too, and so is one in
# markdown emphasis ("**System**:"). Found from each colon back: a search for the labels themselves
# is slow on CJK text.
_COLON = re.compile("[:：]")
_LABEL_BEFORE = re.compile(
    r"(?:(?<![A-Za-z0-9])(?<![A-Za-z0-9]_)(?:human|assistant|system|user|developer|ai|bot|tool|sessionid)"
    r"|用[户戶戸]|使用者|系[统統]|助手|助理|人[类類]|[开開][发發]者|ユーザー?|システム|アシスタント)[\s*_]*\Z",
    re.IGNORECASE,
)
_LABEL_REACH = 16
_LABEL_TRAIL = " \t*_"
_LABEL_LAST = frozenset("nNtTmMrRiIdDlL户戶戸者统統手理类類ーザムト")


def _label_colons(text: str) -> list[int]:
    """Where in ``text`` a colon ends a speaker label."""
    found = []
    for m in _COLON.finditer(text):
        end = len(text[: m.start()].rstrip(_LABEL_TRAIL))
        if (
            end
            and text[end - 1] in _LABEL_LAST
            and _LABEL_BEFORE.search(text, max(0, end - _LABEL_REACH), m.start())
        ):
            found.append(m.start())
    return found


_FENCE = re.compile(r"`{3,}|~{3,}")
_FULL_WIDTH = str.maketrans({"`": "｀", "~": "～", "<": "＜", ">": "＞", "#": "＃"})
# Markdown that a client acts on, read on the line as it is (a renderer parses ASCII syntax only):
# an image (drawn, so fetched, as soon as the text is shown), a link whose address can carry data
# (its text hides the address), a link reference definition at the start of the memory.
_MD_IMAGE = re.compile(r"!\[")
# The "]" that closes a link's text, its address read ahead: to the closing angle bracket, or else
# to the next space (parentheses may nest in it, and reading too far only breaks a link that was
# harmless). A look-ahead, so that every "](" is judged on its own.
_MD_LINK_END = re.compile(r"\](?=\(\s*(?:[<＜]([^>＞]*)|(\S*)))")
_MD_DEFINITION = re.compile(r"\s*\[([^\[\]]+)\]:")
_URL_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
_URL_DATA = re.compile(r"[?#%=@]|[A-Za-z0-9+_=~]{16,}")


def data_url(url: str) -> bool:
    """Whether a link's address can carry data: a scheme other than http(s) (``javascript:``,
    ``data:``, ``file:``), a query or fragment, a percent-escape, user info, or a run of 16 or
    more letters and digits (an encoded value, a token, a hash)."""
    scheme = _URL_SCHEME.match(url)
    if scheme and scheme.group(1).lower() not in ("http", "https"):
        return True
    return _URL_DATA.search(url) is not None


def inert(text: str, limit: int | None = MAX_TEXT) -> str:
    """A memory's text as any model reads it (session start, recall, Stop, notices, MCP output).

    One line (``records.one_line``), at most ``limit`` characters (a memory's 400; None for a
    whole notice line that quotes memories), and nothing in it that could act:
    tag-like "<" and its ">" become full-width ＜＞ (nothing opens or closes a block), a leading
    "#" or ">" becomes full-width (no heading or quote), the colon after a speaker label becomes
    "∶" (no "Human:" or "系统：" turn), code fences become full-width, the confirm marker and the
    plugin's notice header are replaced by a stand-in. Each check reads the line with look-alikes
    folded (``textfold``: "МЕМОRҮ_СОNFІRМ_V１", "Ѕуѕtеm꞉", "‹system›", "系統："), and what it finds
    is replaced by the same stand-in, whatever the spelling. Markdown that a client acts on is
    broken with full-width brackets: every image ("![" becomes "！［"), a link whose address can
    carry data (``data_url``: its "](" becomes "］("), a link reference definition at the start.
    The stored text is never changed: hand edits and the original plugin's files reach here
    unnormalised. Ordinary text passes through unchanged, and ``inert(inert(t)) == inert(t)``.
    """
    line = one_line(text)
    if limit is not None and len(line) > limit:
        line = line[: limit - 1] + "…"
    folded = fold(line)
    if folded.origin is None:
        line = _MARKER.sub(MARKER_STANDIN, line)
        line = _NOTICE.sub(NOTICE_STANDIN, line)
        if "``" in line or "~~" in line:
            line = _FENCE.sub(lambda m: m.group().translate(_FULL_WIDTH), line)
        if "<" in line:
            line = _TAG.sub(_plain_tag, line)
        for at in reversed(_label_colons(line)):
            line = line[:at] + "∶" + line[at + 1 :]
        if line[:1] in ("#", ">"):
            line = line[0].translate(_FULL_WIDTH) + line[1:]
    else:
        line = _inert_folded(folded)
    return _inert_markdown(line) if "[" in line else line


def _plain_tag(m: re.Match[str]) -> str:
    return "＜" + m.group(1) + m.group(2).translate(_FULL_WIDTH)


Edit = tuple[int, int, str]


def _inert_folded(folded: Folded) -> str:
    """The checks of ``inert`` on a line with look-alikes: each reads the folded line, and what
    it finds is replaced in the line itself; the line is folded again after each."""
    for check in (_marker_edits, _fence_edits, _tag_edits, _role_edits, _lead_edits):
        edits = check(folded)
        if edits:
            line = folded.line
            for start, end, new in sorted(edits, reverse=True):
                line = line[:start] + new + line[end:]
            folded = fold(line)
    return folded.line


def _marker_edits(f: Folded) -> list[Edit]:
    edits = [(*f.span(*m.span()), MARKER_STANDIN) for m in _MARKER.finditer(f.text)]
    return edits + [(*f.span(*m.span()), NOTICE_STANDIN) for m in _NOTICE.finditer(f.text)]


def _fence_edits(f: Folded) -> list[Edit]:
    return [(*f.span(*m.span()), m.group().translate(_FULL_WIDTH)) for m in _FENCE.finditer(f.text)]


def _tag_edits(f: Folded) -> list[Edit]:
    edits: list[Edit] = []
    for m in _TAG.finditer(f.text):
        start, end = f.span(m.start(), m.start() + 1)
        if f.line[start:end] not in _ANGLE_OPENERS and not _LATIN_TAG.match(f.text, m.start() + 1):
            continue
        edits.append((start, end, "＜"))
        if m.group(2):
            edits.append((*f.span(m.end() - 1, m.end()), "＞"))
    return edits


def _role_edits(f: Folded) -> list[Edit]:
    # The line itself is searched too: a full-width letter before "System:" is not one word with
    # it, as its folded "A" would be.
    found = {f.span(at, at + 1) for at in _label_colons(f.text)}
    found |= {(at, at + 1) for at in _label_colons(f.line)}
    return [(start, end, "∶") for start, end in found]


def _lead_edits(f: Folded) -> list[Edit]:
    # Marks folded away may leave a space first: the first character that shows counts.
    at = len(f.text) - len(f.text.lstrip())
    if f.text[at : at + 1] in ("#", ">"):
        return [(*f.span(at, at + 1), f.text[at].translate(_FULL_WIDTH))]
    return []


def _inert_link_end(m: re.Match[str]) -> str:
    return "］" if data_url(m.group(1) or m.group(2) or "") else "]"


def _inert_markdown(line: str) -> str:
    line = _MD_IMAGE.sub("！［", line)
    line = _MD_LINK_END.sub(_inert_link_end, line)
    definition = _MD_DEFINITION.match(line)
    if definition:
        line = line.replace("[", "［", 1).replace("]", "］", 1)
    return line


def boundary(own_memory: str, deposition: str) -> str:
    """The responsibility paragraph; ``deposition`` is "on" or why learning is off or paused
    (``memself.judge.start.deposition_status``)."""
    if deposition in _DEPOSITION_NOTICES:
        return _DEPOSITION_NOTICES[deposition]
    text = BOUNDARY_PLUGIN_SCOPED.format(own_memory=own_memory) if own_memory else BOUNDARY
    return f"{text}\n\n{SECRET_REPAIRED}" if deposition == "repaired" else text


def reminder(own_memory: str, deposition: str) -> str:
    if deposition in _DEPOSITION_NOTICES:
        return _DEPOSITION_NOTICES[deposition]
    text = REMINDER_PLUGIN_SCOPED.format(own_memory=own_memory) if own_memory else REMINDER
    return f"{text}\n\n{SECRET_REPAIRED}" if deposition == "repaired" else text


def session_start(
    rules: Sequence[Memory],
    own_memory: str,
    deposition: str,
    char_limit: int | None = None,
    team_rules: Sequence[Memory] = (),
) -> str:
    """Rules by stored confidence, at most 50, within the host's injection limit if it has one.
    ``team_rules``: the ones the repository carries (``memself.store.team``), listed after the
    user's own under a heading that says where they come from, in at most half the limit."""
    team = _team_section(team_rules, char_limit // 2 if char_limit else None)
    limit = char_limit - len(team) if char_limit and team else char_limit
    shown = list(rules[:SESSION_RULE_LIMIT])
    over_cap = len(rules) - len(shown)
    head = f"{SESSION_HEADER}\n\n{boundary(own_memory, deposition)}\n\n"
    title = f"## {GROUP_LABELS['rule']}（共 {len(rules)} 条，必须遵守）\n\n"
    if not shown:
        return head + title + "（暂无）" + team
    lines = [f"{i}. {inert(m.text)}（置信度 {fmt_confidence(m.confidence)}）" for i, m in enumerate(shown, 1)]
    return _fit(head + title, lines, over_cap, len(rules), limit) + team


def _team_section(rules: Sequence[Memory], char_limit: int | None) -> str:
    """ "" without team rules, else the section that lists them, starting with its blank lines."""
    if not rules:
        return ""
    shown = list(rules[:SESSION_RULE_LIMIT])
    title = f"\n\n{TEAM_RULES_TITLE.format(count=len(rules))}\n\n"
    lines = [f"{i}. {inert(m.text)}" for i, m in enumerate(shown, 1)]
    return _fit(title, lines, len(rules) - len(shown), len(rules), char_limit)


def _fit(prefix: str, lines: list[str], over_cap: int, total: int, char_limit: int | None) -> str:
    """List lines while they fit; say how many were left out and why."""

    def tail(listed: int) -> str:
        left = total - listed
        if left <= 0:
            return ""
        if listed + over_cap == total and over_cap == left:
            return f"\n\n（其余 {left} 条按置信度截断）"
        return f"\n\n（其余 {left} 条因注入长度限制未列出，相关时仍会在每轮召回中出现）"

    for count in range(len(lines), -1, -1):
        text = prefix + "\n".join(lines[:count]) + tail(count)
        if char_limit is None or len(text) <= char_limit:
            return text
    return prefix.rstrip()[: char_limit or None]


def recall_block(rules: Sequence[RecallHit], projects: Sequence[RecallHit]) -> str:
    """The per-prompt block, rules and project facts listed separately; "" when neither passed."""
    if not rules and not projects:
        return ""
    lines = [RECALL_HEADER]
    for group, hits in (("rule", rules), ("project", projects)):
        if hits:
            lines += ["", f"## {GROUP_SHORT_LABELS[group]}"]
            lines += [
                f"- {inert(h.text)}（置信度 {fmt_confidence(h.confidence)}，相关度 {h.score:.2f}）"
                for h in hits
            ]
    lines += ["", RECALL_FOOTER]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Result lines after a write: the judge, Stop and memory_resolve
# ---------------------------------------------------------------------------------------------
# Every line ends with the group the memory landed in (「归类：rule（规则与偏好）」) so that a wrong
# group is noticed at once: the written group for a new memory, the target's otherwise. A
# reinforced or replaced memory may be a hand edit that never went through ``check_text``.

VERBS = {"create": "新增", "reinforce": "强化", "merge": "合并", "replace": "替换"}


def group_suffix(group: str) -> str:
    return f"归类：{group}（{GROUP_LABELS.get(group, group)}）"


SCOPE_ALL = "所有项目"
SCOPE_HERE = "仅此项目"
_SCOPE_NAME_LIMIT = 80


def scope_label(workspace_name: str) -> str:
    """「仅此项目（pay-service）」 for a workspace's memory, 「所有项目」 for a global one."""
    return f"{SCOPE_HERE}（{inert(workspace_name, _SCOPE_NAME_LIMIT)}）" if workspace_name else SCOPE_ALL


def scope_suffix(scope: str | None) -> str:
    """After the group: where the memory applies. ``None`` (a turn without a workspace, a global
    memory) says nothing, so such lines stay the original's."""
    return "" if scope is None else f"，范围：{scope_label(scope)}"


def gain_text(gain: float) -> str:
    if gain <= 0:
        return "置信度今天已加满，本次不再加分"
    return f"置信度 +{fmt_confidence(gain)}"


def _end(text: str) -> str:
    return text if text.endswith(("。", "！", "？", ".", "!", "?")) else text + "。"


def direct_line(
    action: str, body: str, group: str, gain: float = 0.0, previous: str = "", scope: str | None = None
) -> str:
    """The line Stop shows in no-confirm mode, e.g.
    ``记忆插件memory-self-evolution新增了一条记忆："…"。归类：rule（规则与偏好）``, then the scope
    (``scope_suffix``: the workspace's name, "" for all projects, None for nothing)."""
    line = f'记忆插件memory-self-evolution{VERBS[action]}了一条记忆："{inert(body)}"'
    if action in ("reinforce", "merge"):
        line += f"，{gain_text(gain)}"
    elif action == "replace" and previous:
        line += f"，替换了原来的「{inert(previous)}」"
    return f"{line}。{group_suffix(group)}{scope_suffix(scope)}"


def duplicate_line(body: str, group: str, gain: float, resolve_style: bool, scope: str | None = None) -> str:
    """A create whose text the group already held: the existing memory was reinforced instead."""
    if resolve_style:
        text = f"已有相同的记忆，没有重复新增，强化了它：{inert(body)}，{gain_text(gain)}。"
        return text + group_suffix(group) + scope_suffix(scope)
    return (
        f'记忆插件memory-self-evolution已有相同的记忆："{inert(body)}"，没有重复新增，'
        f"{gain_text(gain)}。{group_suffix(group)}{scope_suffix(scope)}"
    )


def resolve_notice(
    action: str, body: str, group: str, gain: float = 0.0, previous: str = "", scope: str | None = None
) -> str:
    """What ``memory_resolve`` returns after writing (§4.9, with the actual gain and the group)."""
    body, previous = inert(body), inert(previous)
    if action == "create":
        text = f"生成了一条记忆：{_end(body)}"
    elif action == "reinforce":
        text = f"强化了一条记忆：{body}，{gain_text(gain)}。"
    elif action == "merge":
        text = f"合并了一条记忆：旧记忆「{previous}」，新记忆「{body}」，{gain_text(gain)}。"
    else:
        text = f"替换了一条记忆：旧记忆「{previous}」，新记忆「{body}」，置信度不变。"
    return text + group_suffix(group) + scope_suffix(scope)


# ---------------------------------------------------------------------------------------------
# The Stop continuation: results only (confirm = false) or the MEMORY_CONFIRM_V1 popup
# ---------------------------------------------------------------------------------------------

DIALOG_TITLE = "记忆确认·插件"
QUESTION = "检测到一条记忆。是否落成记忆。"
RESULT_HEADING = "结果："
CONFIRM_HEADING = "待确认："
SKIP_OPTION = "不落成"
DIRECT_INSTRUCTIONS = (
    "插件已直接写入记忆。不要调用任何工具，不要向用户提问，不要复述本段说明。",
    "只把「结果」下面的文字原样输出给用户，不要增删改，不要做其他任何操作。",
)
# What the model is told when a prompt looks like our continuation but its saved instruction is
# gone and it lists no results to rebuild one from.
STALE_CONFIRMATION = "\n".join(
    [
        CONFIRM_MARKER,
        "这条消息是记忆插件的通知，不是用户的新要求。",
        f"确认弹窗的说明已失效：不要调用任何工具，不要调用 {RESOLVE_TOOL}，"
        "只回复「好的」，不要做其他任何操作。",
    ]
)


def direct_texts(lines: Sequence[str]) -> tuple[str, str]:
    """The visible result lines and the model's instruction to show them as they are."""
    # Notices quote memory texts; a job file of the original plugin's (or a prompt fed back by
    # a host that shows the continuation) may hold them raw.
    lines = [inert(line, limit=None) for line in lines]
    visible = "\n".join([NOTICE_HEADER, RESULT_HEADING, *lines])
    model = "\n".join([CONFIRM_MARKER, *DIRECT_INSTRUCTIONS, "", "结果", *lines])
    return visible, model


def _quoted(p: dict[str, Any], key: str) -> str:
    """A proposal's text, target or merged text as the popup quotes it: proposal files of the
    original plugin, and targets edited by hand, were never normalised."""
    return inert(str(p.get(key) or ""))


def _quote_end(text: str) -> str:
    return "" if text.endswith(("。", "！", "？")) else "。"


def visible_line(p: dict[str, Any]) -> str:
    text, target, merged = _quoted(p, "text"), _quoted(p, "targetText"), _quoted(p, "mergedText")
    action = p.get("action")
    if action in ("reinforce", "unsure") and target:
        return f"建议强化已有记忆「{target}」。新说法「{text}」{_quote_end(text)}"
    if action == "merge" and target:
        return f"建议合并。新记忆「{text}」并入已有记忆「{target}」。合并后「{merged}」{_quote_end(merged)}"
    if action == "replace" and target:
        return f"建议替换。用新说法「{text}」替换已有记忆「{target}」{_quote_end(target)}"
    return f"建议新增记忆「{text}」{_quote_end(text)}"


APPLIES_WHEN_LABEL = "适用场景："


def requests_line(requests: Sequence[str]) -> str:
    """A memory's appliesWhen as one short line (「适用场景：A；B」), each request quoted inertly;
    "" when it has none."""
    return APPLIES_WHEN_LABEL + "；".join(inert(r) for r in requests) if requests else ""


# A memory's scope, wherever a person or a model looks at memories (CLI, MCP, the page, doctor):
# every project, or one workspace named with its path (two repositories may share a name).
SCOPE_LABEL = "范围："
SCOPE_GLOBAL = "所有项目"


def workspace_label(key: str, name: str = "") -> str:
    """「pay-service（/home/me/pay-service）」; both parts one clean line."""
    return f"{one_line(name or display_name(key))}（{one_line(key)}）"


def scope_text(key: str, name: str = "") -> str:
    """「所有项目」 for a global memory (``key`` ""), else 「仅项目 pay-service（/path）」."""
    return f"仅项目 {workspace_label(key, name)}" if key else SCOPE_GLOBAL


def _requests(p: dict[str, Any], key: str) -> str:
    # Proposal files of the original plugin have none; a value that is not a list of short
    # strings is read as none rather than shown.
    return requests_line(read_applies_when(p.get(key)))


# The decision suffix of a create in an explicit scope (``create_project_here``): the scope the
# popup named, whatever the judge recommended.
SCOPE_DECISIONS = {WORKSPACE: "here", GLOBAL: "all"}
# The team scope is offered only when the judge recommended it (a turn in a git repository).
TEAM_SUFFIX = "team"


def _suffix(scope: str) -> str:
    return TEAM_SUFFIX if scope == TEAM else SCOPE_DECISIONS[scope]


def recommended_scope(p: dict[str, Any]) -> str:
    """The proposal's scope (``global`` | ``workspace``), or its group's usual one."""
    return read_scope(p.get("scope"), p.get("category"))


def _scope_named(scope: str, workspace_name: str) -> str:
    if scope == TEAM:
        return team_scope_label(workspace_name)
    return scope_label(workspace_name if scope == WORKSPACE else "")


def popup_options(p: dict[str, Any], workspace_name: str = "") -> list[tuple[str, str]]:
    """``(label, decision)`` pairs offered for a proposal; the label doubles as the option id.

    ``workspace_name`` is the judged turn's workspace ("" when it had none: the original's
    options). With one, a create names its scope, and the options stay four, as a host's popup
    takes at most four: the recommended group and scope, the same group in the other scope, the
    other group in the recommended scope (or, after a reinforce, merge or replace offer, nothing
    more: that offer comes first), and discard.
    """
    original = _options(p)
    if not workspace_name:
        return original
    head = original[:-3]  # the reinforce, merge or replace offer, when there is one
    text = _quoted(p, "text")
    group = p.get("category") if p.get("category") in GROUPS else "rule"
    other = "project" if group == "rule" else "rule"
    scope = recommended_scope(p)
    flipped = GLOBAL if scope == WORKSPACE else WORKSPACE  # team's other choice: only here
    verb = "仍新建" if head else "落成"
    options = [
        *head,
        (
            f"{verb}，使用推荐标签 {group}，范围：{_scope_named(scope, workspace_name)}「{text}」",
            f"create_{group}_{_suffix(scope)}",
        ),
        (
            f"{verb}，使用推荐标签 {group}，范围改为：{_scope_named(flipped, workspace_name)}「{text}」",
            f"create_{group}_{_suffix(flipped)}",
        ),
    ]
    if not head:
        options.append(
            (
                f"{verb}，把标签改为 {other}，范围：{_scope_named(scope, workspace_name)}「{text}」",
                f"create_{other}_{_suffix(scope)}",
            )
        )
    return [*options, (SKIP_OPTION, "discard")]


def _options(p: dict[str, Any]) -> list[tuple[str, str]]:
    text, target = _quoted(p, "text"), _quoted(p, "targetText")
    group = p.get("category") if p.get("category") in GROUPS else "rule"
    other = "project" if group == "rule" else "rule"
    action = p.get("action")
    head: list[tuple[str, str]] = []
    create_verb = "落成"
    if action in ("reinforce", "unsure") and target:
        head = [(f"强化已有记忆 「{target}」", "reinforce")]
        create_verb = "仍新建"
    elif action == "merge" and target and p.get("mergedText"):
        head = [(f"合并进已有记忆 「{target}」", "merge")]
        create_verb = "仍新建"
    elif action == "replace" and target:
        head = [(f"用新说法替换已有记忆 「{target}」", "replace")]
        create_verb = "仍新建"
    return [
        *head,
        (f"{create_verb}，使用推荐标签 {group}「{text}」", f"create_{group}"),
        (f"{create_verb}，把标签改为 {other}「{text}」", f"create_{other}"),
        (SKIP_OPTION, "discard"),
    ]


def scope_line(p: dict[str, Any], workspace_name: str) -> str:
    """Under a proposal of a turn in a workspace: where the new memory would apply."""
    line = f"范围：{_scope_named(recommended_scope(p), workspace_name)}（推荐）"
    if p.get("action") in ("reinforce", "unsure", "merge", "replace") and p.get("targetText"):
        line += "；强化、合并或替换时沿用已有记忆的范围"
    return line


def _decision_list(scoped: bool, team: bool = False) -> str:
    if not scoped:
        return "create_rule、create_project、reinforce、merge、replace 或 discard"
    suffixes = [*SCOPE_DECISIONS.values(), *([TEAM_SUFFIX] if team else [])]
    creates = [f"create_{g}_{s}" for g in GROUPS for s in suffixes]
    return (
        "、".join(["create_rule", "create_project", *creates, "reinforce", "merge", "replace"])
        + " 或 discard"
    )


def _offers_team(proposals: Sequence[dict[str, Any]], names: Sequence[str]) -> bool:
    return any(name and recommended_scope(p) == TEAM for p, name in zip(proposals, names, strict=True))


def confirm_texts(
    proposal_ids: Sequence[str],
    proposals: Sequence[dict[str, Any]],
    notice_lines: Sequence[str],
    ask_phrase: str,
    forbidden_tools: str,
    workspace_names: Sequence[str] = (),
) -> tuple[str, str]:
    """The visible lines and the ``MEMORY_CONFIRM_V1`` instruction for the host's model.

    ``ask_phrase`` names the host's popup tool and ``forbidden_tools`` the memory write tools the
    model must not call besides ``memory_resolve``: both are the host's, chosen by the caller.
    ``workspace_names`` holds, per proposal, the name of its turn's workspace ("" or missing: none);
    a proposal with one shows its recommended scope and offers both.
    """
    names = [*workspace_names, *([""] * (len(proposals) - len(workspace_names)))]
    notice_lines = [inert(line, limit=None) for line in notice_lines]
    visible = [NOTICE_HEADER]
    if notice_lines:
        visible += [RESULT_HEADING, *notice_lines]
    visible.append(CONFIRM_HEADING)
    for i, (p, name) in enumerate(zip(proposals, names, strict=True), 1):
        visible.append(f"{i}. {visible_line(p)}")
        if name:
            visible.append(f"   {scope_line(p, name)}")
        requests = _requests(p, "appliesWhen")
        if requests:
            visible.append(f"   {requests}")  # under its item, as a detail of it
    count = len(proposals)
    model = [
        CONFIRM_MARKER,
        f"本轮回答已经结束。记忆插件在后台分析出 {count} 条待确认的记忆，需要逐条请用户确认。",
        f"调用 {ask_phrase} 发起确认：每条一个问题，一次调用里放进全部 {count} 个问题；"
        "工具一次只能问一个问题时，按顺序逐条调用。",
        "不要用文字列出草稿让用户回复，也不要自己判断该不该记、改写正文或改选项。",
        f"只有 {RESOLVE_TOOL} 能写入这些记忆；不要调用 {forbidden_tools} 或其它记忆写工具。",
        f"弹窗标题必须是「{DIALOG_TITLE}」；每个选项的 id 就是选项文字，逐字照抄下面给出的选项。",
        f"用户点选后，对每一条调用一次 {RESOLVE_TOOL}，sessionID 用该条的 sessionID，decision 取所选选项"
        f"箭头后面的值（{_decision_list(any(names), _offers_team(proposals, names))}）。",
        f"提问工具返回 Skipped，或者用户关闭、取消了弹窗时，不要调用 {RESOLVE_TOOL}，也不要再追问。",
        "处理完后用一句话告诉用户结果，不要做其他任何操作。",
    ]
    if notice_lines:
        model += ["", "另外，插件已直接写入下面的记忆，原样告知用户即可：", *notice_lines]
    for i, (pid, p, name) in enumerate(zip(proposal_ids, proposals, names, strict=True), 1):
        model += [
            "",
            f"第 {i} 条",
            f"sessionID：{pid}",
            f"正文：{_quoted(p, 'text')}",
            f"推荐标签：{p.get('category') or 'rule'}",
        ]
        if name:
            model.append(f"推荐范围：{_scope_named(recommended_scope(p), name)}")
        if p.get("evidence"):
            model.append(f"佐证：{_quoted(p, 'evidence')}")
        requests = _requests(p, "appliesWhen")
        if requests:
            model.append(requests)
        if p.get("score") is not None:
            model.append(f"与最相近记忆的相似度：{float(p['score']):.2f}")
        if p.get("targetText"):
            model.append(f"最相近记忆：{_quoted(p, 'targetText')}")
        if p.get("action") == "merge" and p.get("mergedText"):
            model.append(f"合并后正文：{_quoted(p, 'mergedText')}")
            merged_requests = _requests(p, "mergedAppliesWhen")
            if merged_requests:
                model.append("合并后" + merged_requests)
        model += [f"题面：{QUESTION}", "选项："]
        model += [f"- {label} → {decision}" for label, decision in popup_options(p, name)]
    return "\n".join(visible), "\n".join(model)


def backlog_progress(progress: dict[str, Any]) -> str:
    """The engine's background encoding as ``engine status`` and ``doctor`` show it: done, total,
    rate, time left (``Backlog.progress``)."""
    done, total = int(progress.get("done") or 0), int(progress.get("total") or 0)
    rate = float(progress.get("rate_per_s") or 0.0)
    eta = progress.get("eta_s")
    line = f"已编码 {done}/{total} 条"
    if rate > 0:
        line += f"，每秒约 {rate:g} 条"
    if isinstance(eta, (int, float)):
        return line + f"，预计还需 {_seconds_text(float(eta))}（已编码的记忆已可召回）"
    line += "，正在估算剩余时间"
    return line + "（已编码的记忆已可召回）"


def _seconds_text(seconds: float) -> str:
    whole = int(seconds + 0.5)
    if whole < 60:
        return f"{whole} 秒"
    if whole < 3600:
        return f"{whole // 60} 分 {whole % 60} 秒"
    return f"{whole // 3600} 小时 {whole % 3600 // 60} 分"


# ---------------------------------------------------------------------------------------------
# Rules kept or broken, facts used or not (``memself.kept``)
# ---------------------------------------------------------------------------------------------

BROKEN_NOTICE_LIMIT = 60  # characters of a rule's text in the one-line notice
OFTEN_BROKEN_ADVICE = "经常被违反：换个说法或写得更具体"


def broken_notice(rule_texts: Sequence[str]) -> str:
    """The one line the next prompt of the session carries when the previous answer broke rules."""
    named = "；".join(f"「{inert(t, BROKEN_NOTICE_LIMIT)}」" for t in rule_texts if t.strip())
    return f"记忆提示：上一轮回答没有遵守规则{named}，本轮请遵守。" if named else ""


MODEL_NAME_LIMIT = 120  # characters of a model name in a notice (a local folder's path may be long)


def model_notice(wanted: str, serving: str) -> str:
    """The line each prompt carries while config.json names a model the engine could not load."""
    wanted, serving = inert(wanted, MODEL_NAME_LIMIT), inert(serving, MODEL_NAME_LIMIT)
    return (
        f"记忆提示：config.json 里的向量模型 {wanted} 无法加载，"
        f"召回仍在用 {serving}（用它自己的向量和召回线）。"
        f"请提醒用户在终端运行 memself config model {wanted} 查看原因（成功才会切换），"
        f"或运行 memself config model {serving} 改回。"
    )


def reload_failed_line(error: str) -> str:
    """What ``engine status`` and ``doctor`` say about an engine whose last reload failed."""
    return f"数据变化后重新加载失败：{error}；仍在用上次加载的记忆和索引，修好后下一次请求会自动重新加载"


def model_problem_lines(problem: dict[str, Any]) -> list[str]:
    """What ``engine status``, ``doctor`` and ``memself recall`` say about an engine that could
    not load the model config.json names: which one, why, what it serves instead, the fix."""
    wanted, serving = str(problem.get("wanted", "")), str(problem.get("serving", ""))
    return [
        f"config.json 里的向量模型 {wanted} 无法加载：{problem.get('reason', '')}",
        f"召回仍在用 {serving}（索引里是它的向量，用它自己的召回线）",
        f"修复：memself config model {wanted}（先准备，成功才切换），或 memself config model {serving} 改回",
    ]


STATS_EMPTY = "还没有统计：回答结束后才会统计这一轮注入的记忆有没有被用上、规则有没有被遵守。"


def _pct(share: object) -> str:
    return f"{float(share) * 100:.0f}%" if isinstance(share, (int, float)) else "—"


def _num(value: object) -> str:
    return f"{value:g}" if isinstance(value, (int, float)) else "—"


def stats_lines(stats: dict[str, Any]) -> list[str]:
    """``memself stats`` and the page's usage section, line by line (``memself.kept.stats``)."""
    if not stats.get("turns") and not stats.get("shownMost") and not stats.get("brokenMost"):
        return [STATS_EMPTY]
    rule, project = stats["groups"]["rule"], stats["groups"]["project"]
    lines = [
        f"统计了 {stats['turns']} 轮回答。",
        f"rule：每轮召回 {_num(rule['perTurn'])} 条（会话开始另有全量注入），被违反共 {rule['broken']} 次",
        f"project：每轮召回 {_num(project['perTurn'])} 条，注入 {project['shown']} 次，"
        f"用上 {project['used']} 次（{_pct(project['usedShare'])}）",
        "按范围：",
    ]
    for row in stats["workspaces"]:
        where = scope_text(row["workspace"] or "", row["workspaceName"] or "")
        lines.append(
            f"  {where}：{row['turns']} 轮，每轮 rule {_num(row['rulesPerTurn'])} 条、"
            f"project {_num(row['factsPerTurn'])} 条，事实用上 {_pct(row['usedShare'])}，"
            f"违反规则 {row['rulesBroken']} 次"
        )
    for title, key in (("注入最多的记忆：", "shownMost"), ("注入了却最少用上的记忆：", "usedLeast")):
        if stats[key]:
            lines.append(title)
            lines += [
                f"  {inert(m['text'], 60)}（注入 {m['shown']} 次，用上 {m['used']} 次，id {m['id']}）"
                for m in stats[key]
            ]
    if stats["brokenMost"]:
        lines.append("被违反最多的规则：")
        for m in stats["brokenMost"]:
            advice = f"，{m['advice']}" if m["advice"] else ""
            lines.append(f"  {inert(m['text'], 60)}（被违反 {m['broken']} 次{advice}，id {m['id']}）")
    return lines


# ---------------------------------------------------------------------------------------------
# Team memory: a memory shared into a repository's .memself/, and where a memory comes from
# ---------------------------------------------------------------------------------------------

SCOPE_TEAM = "团队共享"
ORIGIN_LOCAL = "本机"


ORIGIN_LABEL = "来源："


def is_team_memory(memory: Memory) -> bool:
    """A memory a repository carries (``memself.store.team`` gives it this id prefix)."""
    from memself.store.team import ID_PREFIX

    return memory.id.startswith(ID_PREFIX)


def team_file_of(memory: Memory) -> str:
    """The ``.memself/`` file a team memory was read from, relative to its repository."""
    from memself.store.team import TEAM_DIR

    return f"{TEAM_DIR}/{memory.category}.jsonl"


def origin_text(memory: Memory) -> str:
    """Where a listed memory comes from: 「本机」 (the user's own store), or
    「团队（/repo 的 .memself/rule.jsonl）」 for one a repository carries (its workspace is the
    repository's root)."""
    return origin_of(memory.id, memory.workspace, memory.category)


def origin_of(mem_id: str, root: str, group: str) -> str:
    """``origin_text`` from a hit's id, the repository it was recalled in and its group."""
    from memself.store.team import ID_PREFIX, TEAM_DIR

    if not mem_id.startswith(ID_PREFIX) or not root:
        return ORIGIN_LOCAL
    return f"团队（{one_line(root)} 的 {TEAM_DIR}/{group}.jsonl）"


def origin_line(memory: Memory) -> str:
    """「来源：本机」 or 「来源：团队（…），只读」."""
    return ORIGIN_LABEL + origin_text(memory) + ("，只读" if is_team_memory(memory) else "")


def team_scope_label(workspace_name: str) -> str:
    """The popup's name for the team scope: written into the repository's .memself/ for review."""
    return f"{SCOPE_TEAM}（写入 {inert(workspace_name, _SCOPE_NAME_LIMIT)} 仓库的 .memself/，由你检查后提交）"


def share_lines(
    root: str, relative: str, text: str, already: bool, unreadable: Sequence[int] = ()
) -> list[str]:
    """What ``memself share`` (and an accepted team proposal) tells the user: the file, and the
    git commands that are the user's to run; memself never commits."""
    import shlex

    where = os.path.join(root, relative)
    if already:
        lines = [f"{where} 里已经有这条记忆，没有重复写入：{inert(text)}"]
    else:
        lines = [
            f"已写入 {where}：{inert(text)}",
            "memself 不会替你提交。检查无误后可以运行：",
            f"  git -C {shlex.quote(root)} add {shlex.quote(relative)}",
            f"  git -C {shlex.quote(root)} commit -m {shlex.quote('memself: 共享一条团队记忆')}",
        ]
    if unreadable:
        shown = "、".join(str(n) for n in list(unreadable)[:10])
        lines.append(
            f"注意：{relative} 第 {shown} 行无法读取，团队读取时会跳过；"
            "memself 只在文件末尾追加，没有改动这些行，请手动修好或删掉"
        )
    return lines


# After a create the judge proposed for the team: appended to its result line, which stays one line.
TEAM_FALLBACK_NOTE = "；不在 git 仓库里，没有写入团队记忆，改为仅此项目"


def team_shared_note(root: str, relative: str, already: bool) -> str:
    """The memory is in the repository's .memself/ (or already was): the commit is the user's."""
    import shlex

    where = one_line(os.path.join(root, relative))
    if already:
        return f"；{where} 里已经有这条团队记忆，没有重复写入"
    repo, name = shlex.quote(one_line(root)), shlex.quote(one_line(relative))
    return (
        f"；已写入 {where}，memself 不会替你提交，请检查后自己提交"
        f"（git -C {repo} add {name} 然后 git -C {repo} commit）"
    )


def team_refused_note(reason: str) -> str:
    return f"；没有写入团队记忆（{one_line(reason)}），这条记忆只记在本机"


def team_not_asked_note(mem_id: str) -> str:
    """Confirmation off: nobody chose the team, so nothing goes into the repository."""
    return f"；团队共享要在确认弹窗里选择，这次只记在本机（可用 memself share {mem_id} 写入仓库的 .memself/）"


# ---------------------------------------------------------------------------------------------
# Sync state, as doctor and engine status show it (memself sync status prints its own lines)
# ---------------------------------------------------------------------------------------------


def sync_state_lines(info: dict[str, Any], pending: dict[str, int]) -> list[str]:
    """The last sync (time, result) and what waits to be synced: ``info`` is the sync state
    (``lastSync``, ``lastError``, ``lastAttempt``), ``pending`` counts per kind of change."""
    last = str(info.get("lastSync") or "")
    error = one_line(str(info.get("lastError") or ""))
    lines = [f"上次同步 {last}（成功）" if last else "还没有成功同步过"]
    if error:
        lines.append(f"上次尝试 {info.get('lastAttempt') or ''} 失败：{error}")
    total = sum(pending.values())
    if total:
        lines.append(
            f"等待同步 {total} 处改动（新增 {pending['added']} 条、修改 {pending['changed']} 条、"
            f"删除 {pending['deleted']} 条记忆，回收站变动 {pending['trash']} 条）"
        )
    else:
        lines.append("没有等待同步的本机改动")
    return lines
