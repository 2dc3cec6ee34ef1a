"""The memory record, in the original plugin's JSON shape, plus the fields memself adds.

Field order on disk: ``id, text, confidence, category, evidence, firstSeen, lastSeen, deprecated,
createdAt``, then memself's daily-cap fields ``gainDay`` and ``gainToday``, ``appliesWhen`` and
``textChangedAt`` (when memself last changed the text of an existing memory), ``workspace`` and
``workspaceName`` (the workspace a memory belongs to; none: global), those four only when set,
then any unknown keys as found (so a newer original's extra fields survive a rewrite).
Legacy ``observations`` is dropped on read and therefore on the next rewrite.
"""

from __future__ import annotations

import math
import random
import re
import string
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memself.errors import InvalidInput
from memself.store.workspaces import Workspace, display_name, workspace_for_key
from memself.timeutil import iso, local_day

GROUPS = ("rule", "project")
# The original plugin's names for the groups: the full label (page headings, the session-start
# list, "归类：rule（规则与偏好）") and the short one (recall headings, lists, the CLI).
GROUP_LABELS = {"rule": "规则与偏好", "project": "项目事实"}
GROUP_SHORT_LABELS = {"rule": "规则", "project": "项目事实"}
# Where a new memory belongs when its turn has a workspace: everywhere, or only there. Without a
# usable word from the judge, a group's usual scope: preferences follow the user everywhere,
# facts describe the codebase they were stated in. In a git repository the judge may also say
# "team": the workspace's memory, shared into the repository's .memself/ once the user accepts.
GLOBAL, WORKSPACE, TEAM = "global", "workspace", "team"
SCOPES = (GLOBAL, WORKSPACE, TEAM)
DEFAULT_SCOPES = {"rule": GLOBAL, "project": WORKSPACE}
# At or below this confidence a memory is deprecated: never injected, recalled or decayed.
DEPRECATION_LINE = 0.4
MIN_TEXT, MAX_TEXT = 6, 400
# "Applies when": a few everyday requests in which a memory matters, scored as extra views of it.
# Bounded so that a memory cannot buy itself recall weight with a long list.
MAX_APPLIES_WHEN, MAX_APPLIES_WHEN_TEXT = 4, 80
# Where a memory came from, as the original keeps it: the judge's quote, or the first 200
# characters of the prompt.
MAX_EVIDENCE = 200
_KNOWN = (
    "id",
    "text",
    "confidence",
    "category",
    "evidence",
    "firstSeen",
    "lastSeen",
    "deprecated",
    "createdAt",
    "gainDay",
    "gainToday",
    "appliesWhen",
    "textChangedAt",
    "workspace",
    "workspaceName",
)
_DROPPED = ("observations",)
# Fields ``extra`` does not carry (a set: every record of a large file is filtered through it).
_NOT_EXTRA = frozenset(_KNOWN + _DROPPED)
# Below this magnitude a float is usable as it is (``number_problem`` finds nothing: finite, and
# finite times 1e10); the largest usable magnitude is just under 1.8e298.
_PLAIN_FLOAT = 1e297
_BASE36 = string.digits + string.ascii_lowercase


def round_conf(value: float) -> float:
    """Round like the original (``round(x * 1e10) / 1e10``) so 0.45 - 0.05 is exactly 0.4.

    Never raises: a value the rounding cannot take (NaN, infinite, beyond ~1e298) comes back as
    it is. The store quarantines records carrying such values, so none reaches a write.
    """
    try:
        return round(value * 1e10) / 1e10
    except (OverflowError, ValueError, TypeError):
        return value


def number_problem(name: str, value: object) -> str:
    """Why a numeric field cannot be used (Chinese, for the user), or "" when it can."""
    if type(value) is float and -_PLAIN_FLOAT < value < _PLAIN_FLOAT:
        return ""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return ""
    try:
        number = float(value)
    except OverflowError:
        return f"{name}超出范围"
    if math.isnan(number):
        return f"{name}不是数（NaN）"
    if math.isinf(number):
        return f"{name}是无穷大"
    if math.isinf(number * 1e10):
        return f"{name} {number:g} 超出范围"
    return ""


def record_problem(raw: object) -> str:
    """Why a parsed line is not a usable memory record, or "" when it is."""
    if not isinstance(raw, dict):
        return "缺少 id 或 text"
    text = raw.get("text")
    if not isinstance(text, str) or not text.strip() or not isinstance(raw.get("id"), str):
        return "缺少 id 或 text"
    return number_problem("置信度", raw.get("confidence")) or number_problem(
        "gainToday", raw.get("gainToday")
    )


def _base36(number: int) -> str:
    digits = []
    while True:
        number, rem = divmod(number, 36)
        digits.append(_BASE36[rem])
        if number == 0:
            return "".join(reversed(digits))


def new_id(now: datetime) -> str:
    """``mem-<base36 epoch ms>-<6 random base36 chars>``, as the original."""
    millis = int(now.timestamp() * 1000)
    suffix = "".join(random.choices(_BASE36, k=6))
    return f"mem-{_base36(millis)}-{suffix}"


# A run of variation selectors: a character takes at most one, so the rest can only carry
# hidden bytes (text smuggled in selectors U+FE00-FE0F and U+E0100-E01EF).
_SELECTORS = "\ufe00-\ufe0f\U000e0100-\U000e01ef"
_SELECTOR_RUN = re.compile(f"([{_SELECTORS}])[{_SELECTORS}]+")


def one_line(text: str) -> str:
    """``text`` as one clean line: every line or paragraph separator and other whitespace
    (``\\n \\r \\t \\v \\f``, NEL, U+2028/2029, the Unicode spaces) becomes a single space,
    control characters (Cc) and invisible format characters (Cf: bidi embeddings, overrides and
    isolates, zero-width space and joiners, word joiner, BOM, soft hyphen, tag characters) are
    removed, a lone surrogate becomes U+FFFD, and the ends are trimmed.

    Format characters go entirely, zero-width joiners included: they let a word be split so that
    it reads the same to a model but no longer matches a check (``MEM\\u200bORY_CONFIRM_V1``);
    what is lost is the joining of emoji sequences (a family emoji becomes its members).
    """
    if not text.isprintable():
        text = "".join(_clean_char(c) for c in text)
    text = _SELECTOR_RUN.sub(r"\1", text)
    return " ".join(text.split())


def _clean_char(char: str) -> str:
    if char.isprintable() or char.isspace():
        return char
    import unicodedata  # only for text that has something unprintable: rare, and not free

    category = unicodedata.category(char)
    if category in ("Cc", "Cf"):
        return ""
    return "\ufffd" if category == "Cs" else char


def dedup_key(text: str) -> str:
    """What two texts must share to be the same memory: NFKC (full-width letters, digits and
    punctuation become their half-width forms), Latin case folded, whitespace and punctuation
    (Unicode P*) dropped. Symbols (``+ = <``) and every letter or digit count."""
    return unicodedata.normalize("NFKC", one_line(text)).casefold().translate(_DEDUP_DROP)


class _DropTable(dict[int, int | None]):
    """``str.translate`` table that drops whitespace and punctuation, filled as characters are
    met (a lookup that hits stays in C: a large store's keys cost a fraction of a per-character
    test)."""

    def __missing__(self, code: int) -> int | None:
        char = chr(code)
        value = None if char.isspace() or unicodedata.category(char).startswith("P") else code
        self[code] = value
        return value


_DEDUP_DROP = _DropTable()


def check_text(text: object) -> str:
    """Normalise to one line (``one_line``) and enforce 6..400 characters; the message is for
    the user. Every write of a memory's text goes through here."""
    if not isinstance(text, str):
        raise InvalidInput("记忆正文必须是文字")
    cleaned = one_line(text)
    if not MIN_TEXT <= len(cleaned) <= MAX_TEXT:
        raise InvalidInput(f"记忆正文需要 {MIN_TEXT} 到 {MAX_TEXT} 个字，收到 {len(cleaned)} 个字")
    return cleaned


def check_applies_when(value: object) -> tuple[str, ...]:
    """A memory's "applies when" requests for a write: a list of strings, each normalised to one
    line (``one_line``) and kept when 2..80 characters long, duplicates dropped, at most four;
    the message is for the user."""
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)) or not all(isinstance(item, str) for item in value):
        raise InvalidInput("appliesWhen 必须是一组文字")
    return _applies_when(value)


def read_applies_when(value: object) -> tuple[str, ...]:
    """Requests read leniently (a record, a proposal): a list's string items, cleaned and bounded
    as a write is; anything else is none."""
    return _applies_when(value) if isinstance(value, list) else ()


def _applies_when(items: list[Any] | tuple[Any, ...]) -> tuple[str, ...]:
    kept: list[str] = []
    for item in items:
        if not isinstance(item, str):
            continue
        line = one_line(item)
        if 2 <= len(line) <= MAX_APPLIES_WHEN_TEXT and line not in kept:
            kept.append(line)
        if len(kept) == MAX_APPLIES_WHEN:
            break
    return tuple(kept)


def check_evidence(value: object) -> str:
    """A memory's evidence for a write: one line (``one_line``), at most ``MAX_EVIDENCE``
    characters (cut, not refused: it only says where a memory came from); not a string: none."""
    if not isinstance(value, str):
        return ""
    line = one_line(value[: MAX_EVIDENCE * 4])
    return line if len(line) <= MAX_EVIDENCE else line[: MAX_EVIDENCE - 1].rstrip() + "…"


def read_scope(value: object, group: object) -> str:
    """``global``, ``workspace`` or ``team`` as given (any case, padded); otherwise ``group``'s
    usual scope."""
    said = value.strip().lower() if isinstance(value, str) else ""
    return said if said in SCOPES else DEFAULT_SCOPES.get(str(group), GLOBAL)


def check_group(group: object) -> str:
    if group not in GROUPS:
        raise InvalidInput(f"category 必须是 rule 或 project，收到「{group}」")
    return str(group)


@dataclass
class Memory:
    id: str
    text: str
    confidence: float
    category: str
    evidence: str = ""
    firstSeen: str = ""
    lastSeen: str = ""
    deprecated: bool = False
    createdAt: str = ""
    gainDay: str = ""
    gainToday: float = 0.0
    appliesWhen: tuple[str, ...] = ()
    # When memself last changed this memory's text (merge, replace): vectors made before then,
    # such as the original's embeddings.jsonl, no longer describe it.
    textChangedAt: str = ""
    # The key of the workspace this memory belongs to ("" for a global one) and its display name.
    workspace: str = ""
    workspaceName: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        """Deprecated memories are never injected, recalled, decayed or deduplicated against."""
        return not self.deprecated and self.confidence > DEPRECATION_LINE

    def visible_in(self, workspace: str) -> bool:
        """Global memories are seen everywhere; a workspace's only in that workspace."""
        return not self.workspace or self.workspace == workspace

    def set_workspace(self, workspace: Workspace | None) -> None:
        self.workspace, self.workspaceName = (workspace.key, workspace.name) if workspace else ("", "")

    @property
    def last_active(self) -> str:
        return self.lastSeen or self.createdAt

    @classmethod
    def create(
        cls,
        text: str,
        group: str,
        now: datetime,
        evidence: str = "",
        applies_when: Sequence[str] = (),
        workspace: Workspace | None = None,
    ) -> Memory:
        stamp = iso(now)
        memory = cls(
            id=new_id(now),
            text=check_text(text),
            confidence=0.5,
            category=check_group(group),
            evidence=check_evidence(evidence),
            firstSeen=stamp,
            lastSeen=stamp,
            deprecated=False,
            createdAt=stamp,
            # The creation day counts as a day whose gain is already full.
            gainDay=local_day(now),
            gainToday=0.1,
            appliesWhen=check_applies_when(applies_when),
        )
        memory.set_workspace(workspace)
        return memory

    @classmethod
    def from_json(cls, raw: object, file_group: str) -> Memory | None:
        """A record from a group file, or None when the line is not a usable memory."""
        if not isinstance(raw, dict):
            return None
        get = raw.get  # bound once: a large group file reads every record through here
        text = get("text")
        mem_id = get("id")
        if not isinstance(text, str) or not text.strip() or not isinstance(mem_id, str):
            return None
        category = get("category")
        if category not in GROUPS:
            category = file_group if file_group in GROUPS else "rule"
        extra = {k: v for k, v in raw.items() if k not in _NOT_EXTRA}
        key = get("workspace")
        workspace = _read_workspace(raw) if key is not None else _NO_WORKSPACE
        if key is not None and not workspace["workspace"]:
            # Unusable (a hand edit): the memory counts as global, and the value is kept as found.
            extra.update({k: raw[k] for k in ("workspace", "workspaceName") if k in raw})
        applies = get("appliesWhen")
        return cls(
            id=mem_id,
            text=text,
            confidence=_number(get("confidence"), 0.5),
            category=category,
            evidence=_str(get("evidence")),
            firstSeen=_str(get("firstSeen")),
            lastSeen=_str(get("lastSeen")),
            deprecated=get("deprecated") is True,
            createdAt=_str(get("createdAt")),
            gainDay=_str(get("gainDay")),
            gainToday=_number(get("gainToday"), 0.0),
            # Read leniently (a hand edit must not lose the memory), kept as clean as a write.
            appliesWhen=read_applies_when(applies) if applies is not None else (),
            textChangedAt=_str(get("textChangedAt")),
            **workspace,
            extra=extra,
        )

    def set_text(self, text: str, now: datetime) -> str:
        """Change the text of this existing memory; returns the previous text."""
        previous = self.text
        if text != previous:
            self.text = text
            self.textChangedAt = iso(now)
        return previous

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "text": self.text,
            "confidence": round_conf(self.confidence),
            "category": self.category,
            "evidence": self.evidence,
            "firstSeen": self.firstSeen,
            "lastSeen": self.lastSeen,
            "deprecated": self.deprecated,
            "createdAt": self.createdAt,
        }
        if self.gainDay:
            out["gainDay"] = self.gainDay
            out["gainToday"] = round_conf(self.gainToday)
        if self.appliesWhen:  # absent when empty: such records stay byte-identical to the original's
            out["appliesWhen"] = list(self.appliesWhen)
        if self.textChangedAt:
            out["textChangedAt"] = self.textChangedAt
        if self.workspace:
            out["workspace"] = self.workspace
            out["workspaceName"] = self.workspaceName or display_name(self.workspace)
        for key, value in self.extra.items():
            out.setdefault(key, value)
        return out


_NO_WORKSPACE = {"workspace": "", "workspaceName": ""}  # only unpacked, never changed


def _read_workspace(raw: dict[str, Any]) -> dict[str, str]:
    """A record's workspace; a key that is not an absolute path (a hand edit) counts as none, so
    the memory is global rather than lost to a workspace nobody is in."""
    found = workspace_for_key(_str(raw.get("workspace")))
    if found is None:
        return {"workspace": "", "workspaceName": ""}
    return {"workspace": found.key, "workspaceName": _str(raw.get("workspaceName")) or found.name}


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _number(value: object, default: float) -> float:
    """A usable float, else ``default`` (records read from files are checked by ``record_problem``
    first; this keeps every other caller from crashing on a hand-made record)."""
    if type(value) is float and -_PLAIN_FLOAT < value < _PLAIN_FLOAT:
        return value  # the common case, decided without building a problem text
    if not isinstance(value, (int, float)) or isinstance(value, bool) or number_problem("", value):
        return default
    return float(value)


def sort_memories(memories: list[Memory]) -> list[Memory]:
    """Confidence desc, then last activity desc (ISO strings compare chronologically)."""
    by_time = sorted(memories, key=lambda m: m.last_active, reverse=True)
    return sorted(by_time, key=lambda m: round_conf(m.confidence), reverse=True)


def fmt_confidence(value: float) -> str:
    """Two decimals without trailing zeros: 0.5, 0.55, 1 (original ``fmtConfidence``)."""
    text = f"{round(value + 1e-12, 2):.2f}".rstrip("0").rstrip(".")
    return text or "0"
