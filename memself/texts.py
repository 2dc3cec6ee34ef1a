"""Every text the hooks inject into a host's context, in one place to read and review together.

Chinese, as in the original. ``plugin_scoped`` selects Claude Code's wording, which constrains only
this plugin and does not ask the model to set Claude Code's own memory aside.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from memself.records import MAX_TEXT, Memory, fmt_confidence, one_line

SESSION_RULE_LIMIT = 50
SESSION_HEADER = "# 长期记忆（自动生成，请勿手动编辑）"

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
    "这些约束只针对本插件，不影响 Claude Code 自带的记忆。下面的规则仍然必须遵守。"
)

REMINDER = (
    "记忆由 memory-self-evolution 插件在后台判断。用户陈述偏好、规范或要求记住时，你只需回应并照做："
    "不要判断是否该记，不要调用提问工具发起「检测到一条记忆」确认，也不要主动调用 memory_resolve "
    "或其它记忆写工具。只有收到含 MEMORY_CONFIRM_V1 的插件指令时，才按指令弹窗并处理对应 sessionID。"
)
REMINDER_PLUGIN_SCOPED = (
    "memory-self-evolution 插件的记忆由它在后台判断。用户陈述偏好、规范或要求记住时，就这个插件而言你只需"
    "回应并照做：不要替它判断是否该记，不要调用提问工具发起「检测到一条记忆」确认，也不要主动调用 "
    "memory_resolve 或它的其它记忆写工具。只有收到含 MEMORY_CONFIRM_V1 的插件指令时，才按指令弹窗并处理"
    "对应 sessionID。这些约束只针对本插件，不影响 Claude Code 自带的记忆。"
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


# The confirm marker however it is spelled or spaced (a model reads them all alike).
_MARKER = re.compile(r"memory[\s_\-]*confirm[\s_\-]*v\s*1", re.IGNORECASE)
_NOTICE = re.compile(r"memory-self-evolution\s*捕捉到了新的记忆\s*[:：]?", re.IGNORECASE)
# "<" opening anything a model or a host could take for markup: a tag (any letters, CJK too),
# a closing tag, a comment or declaration, a processing instruction, a chat-template token.
_TAG = re.compile(r"<(?=\s*(?:[/!?|]|[^\W\d_]))([^<>]*)(>?)")
# A speaker label: "Human:", "SYSTEM：", "用户：" ... (and the popup's own "sessionID：").
_ROLE = re.compile(
    r"((?<![A-Za-z0-9_])(?:human|assistant|system|user|developer|ai|bot|tool|sessionid)\s*"
    r"|(?:用户|系统|助手|人类|助理|开发者)\s*)[:：]",
    re.IGNORECASE,
)
_FENCE = re.compile(r"`{3,}|~{3,}")
_FULL_WIDTH = str.maketrans({"`": "｀", "~": "～", "<": "＜", ">": "＞", "#": "＃"})


def inert(text: str, limit: int | None = MAX_TEXT) -> str:
    """A memory's text as any model reads it (session start, recall, Stop, notices, MCP output).

    One line (``records.one_line``), at most ``limit`` characters (a memory's 400; None for a
    whole notice line that quotes memories), and nothing in it that could act:
    tag-like "<" and its ">" become full-width ＜＞ (nothing opens or closes a block), a leading
    "#" or ">" becomes full-width (no heading or quote), the colon after a speaker label becomes
    "∶" (no "Human:" or "系统：" turn), code fences become full-width, the confirm marker and the
    plugin's notice header are replaced by a stand-in. The stored text is never changed: hand
    edits and the original plugin's files reach here unnormalised. Ordinary text passes through
    unchanged, and ``inert(inert(t)) == inert(t)``.
    """
    line = one_line(text)
    if limit is not None and len(line) > limit:
        line = line[: limit - 1] + "…"
    line = _MARKER.sub(MARKER_STANDIN, line)
    line = _NOTICE.sub(NOTICE_STANDIN, line)
    line = _FENCE.sub(lambda m: m.group().translate(_FULL_WIDTH), line)
    line = _TAG.sub(lambda m: "＜" + m.group(1) + m.group(2).translate(_FULL_WIDTH), line)
    line = _ROLE.sub(r"\1∶", line)
    if line[:1] in ("#", ">"):
        line = line[0].translate(_FULL_WIDTH) + line[1:]
    return line


def boundary(plugin_scoped: bool, deposition: str) -> str:
    """The responsibility paragraph; ``deposition`` is "on" or why learning is off or paused
    (``memself.judge.start.deposition_status``)."""
    if deposition in _DEPOSITION_NOTICES:
        return _DEPOSITION_NOTICES[deposition]
    text = BOUNDARY_PLUGIN_SCOPED if plugin_scoped else BOUNDARY
    return f"{text}\n\n{SECRET_REPAIRED}" if deposition == "repaired" else text


def reminder(plugin_scoped: bool, deposition: str) -> str:
    if deposition in _DEPOSITION_NOTICES:
        return _DEPOSITION_NOTICES[deposition]
    text = REMINDER_PLUGIN_SCOPED if plugin_scoped else REMINDER
    return f"{text}\n\n{SECRET_REPAIRED}" if deposition == "repaired" else text


def session_start(
    rules: Sequence[Memory], plugin_scoped: bool, deposition: str, char_limit: int | None = None
) -> str:
    """Rules by stored confidence, at most 50, within the host's injection limit if it has one."""
    shown = list(rules[:SESSION_RULE_LIMIT])
    over_cap = len(rules) - len(shown)
    head = f"{SESSION_HEADER}\n\n{boundary(plugin_scoped, deposition)}\n\n"
    title = f"## 规则与偏好（共 {len(rules)} 条，必须遵守）\n\n"
    if not shown:
        return head + title + "（暂无）"
    lines = [f"{i}. {inert(m.text)}（置信度 {fmt_confidence(m.confidence)}）" for i, m in enumerate(shown, 1)]
    body = _fit(head + title, lines, over_cap, len(rules), char_limit)
    return body


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
    for title, hits in (("规则", rules), ("项目事实", projects)):
        if hits:
            lines += ["", f"## {title}"]
            lines += [
                f"- {inert(h.text)}（置信度 {fmt_confidence(h.confidence)}，相关度 {h.score:.2f}）"
                for h in hits
            ]
    lines += ["", RECALL_FOOTER]
    return "\n".join(lines)
