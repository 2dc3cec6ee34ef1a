"""Result lines shown after a memory was written, shared by the judge, Stop and memory_resolve.

Every line ends with the group the memory landed in (「归类：rule（规则与偏好）」) so that a
wrong group is noticed at once: the written group for a new memory, the target's otherwise.
Memory texts are quoted through ``texts.inert``: a reinforced or replaced memory may be a hand
edit that never went through ``check_text``.
"""

from __future__ import annotations

from memself.records import fmt_confidence
from memself.texts import inert

GROUP_LABELS = {"rule": "规则与偏好", "project": "项目事实"}
VERBS = {"create": "新增", "reinforce": "强化", "merge": "合并", "replace": "替换"}


def group_suffix(group: str) -> str:
    return f"归类：{group}（{GROUP_LABELS.get(group, group)}）"


def gain_text(gain: float) -> str:
    if gain <= 0:
        return "置信度今天已加满，本次不再加分"
    return f"置信度 +{fmt_confidence(gain)}"


def _end(text: str) -> str:
    return text if text.endswith(("。", "！", "？", ".", "!", "?")) else text + "。"


def direct_line(action: str, body: str, group: str, gain: float = 0.0, previous: str = "") -> str:
    """The line Stop shows in no-confirm mode, e.g.
    ``记忆插件memory-self-evolution新增了一条记忆："…"。归类：rule（规则与偏好）``."""
    line = f'记忆插件memory-self-evolution{VERBS[action]}了一条记忆："{inert(body)}"'
    if action in ("reinforce", "merge"):
        line += f"，{gain_text(gain)}"
    elif action == "replace" and previous:
        line += f"，替换了原来的「{inert(previous)}」"
    return f"{line}。{group_suffix(group)}"


def resolve_notice(action: str, body: str, group: str, gain: float = 0.0, previous: str = "") -> str:
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
    return text + group_suffix(group)
