"""The case files of ``memself verify``: their two formats, read and checked.

Two formats:

- memself's (``dev-cases.json``): ``{"memories": [{key, group, text}], "relevant": [{prompt,
  expect: [keys]}], "irrelevant": [{prompt, near?}], "single_memory": [{memory: {group, text},
  relevant: [...], irrelevant: [...]}]}``. The pool is built from the file, so the user's own
  memories are never read.
- the original's (``verify-cases.json``): ``{"relevant": [["input", "expected text fragment"]],
  "irrelevant": [...]?, "minHit": int?}``, run against the user's own active memories, read only.
  Without ``irrelevant``, built-in unrelated inputs are used, as the original did.

memself's format may place memories and prompts in workspaces (``memself.verify.workspaces``
measures what scoping does): ``"workspaces"`` at the top declares the names (``{name:
description}`` or ``[names]``; without it, the names the memories use), a memory's ``workspace``
is one of them or null (global), and so is a prompt's (``relevant``, ``irrelevant``, and a
``single_memory`` case for its prompts; null: asked outside any workspace). A relevant prompt may
only expect memories its workspace sees. A file without any of this reads as before.

A malformed file raises ``InvalidInput`` with a Chinese message naming the entry.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memself.errors import InvalidInput
from memself.store.records import GROUPS, check_applies_when

# The original's 11 built-in unrelated inputs (its list, in the user's language).
BUILTIN_IRRELEVANT = (
    "帮我把这段 JSON 格式化一下",
    "今天天气怎么样",
    "把这句话翻译成英文：我明天上午有空",
    "用 Python 写一个快速排序",
    "写一个匹配邮箱地址的正则表达式",
    "这个按钮点了没反应",
    "把这个变量重命名一下",
    "这个报错是什么意思",
    "帮我跑一下测试",
    "帮我看看这个文件",
    "这个方法怎么用",
)


# --------------------------------------------------------------------------------- case files


@dataclass(frozen=True)
class CaseMemory:
    key: str
    group: str
    text: str
    applies_when: tuple[str, ...] = ()  # the memory's appliesWhen (optional; see ``with_applies_when``)
    workspace: str = ""  # the name of its workspace in the set ("": global)


@dataclass(frozen=True)
class RelevantCase:
    prompt: str
    expect: tuple[str, ...]  # memory keys (dev format) or text fragments (original format)
    workspace: str = ""  # the workspace it is asked from ("": none)
    tags: tuple[str, ...] = ()  # labels for per-shape counts, e.g. "shorthand"


@dataclass(frozen=True)
class IrrelevantCase:
    prompt: str
    near: tuple[str, ...] = ()
    workspace: str = ""
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class SingleCase:
    memory: CaseMemory
    relevant: tuple[str, ...]
    irrelevant: tuple[str, ...]
    workspace: str = ""  # where its prompts are asked from


@dataclass(frozen=True)
class CaseSet:
    """Cases of either format; ``fmt`` is ``"dev"`` or ``"original"``."""

    fmt: str
    source: str
    memories: tuple[CaseMemory, ...] = ()
    relevant: tuple[RelevantCase, ...] = ()
    irrelevant: tuple[IrrelevantCase, ...] = ()
    single: tuple[SingleCase, ...] = ()
    min_hit: int | None = None
    workspaces: tuple[str, ...] = ()  # the workspace names of a set that uses them

    @property
    def memory_workspace(self) -> dict[str, str]:
        """Memory key -> its workspace name ("": global), single-memory cases included."""
        out = {m.key: m.workspace for m in self.memories}
        out.update((c.memory.key, c.memory.workspace) for c in self.single)
        return out


def load_cases(path: Path) -> CaseSet:
    """Read a case file of either format; a malformed file raises ``InvalidInput`` (Chinese)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise InvalidInput(f"找不到用例文件：{path}") from exc
    except (OSError, ValueError) as exc:
        raise InvalidInput(f"用例文件 {path} 不是有效的 JSON：{exc}") from exc
    return parse_cases(data, str(path))


def parse_cases(data: object, source: str = "") -> CaseSet:
    if not isinstance(data, dict):
        raise InvalidInput(f"用例文件 {source} 顶层必须是 JSON 对象")
    if "memories" in data:
        return _parse_dev(data, source)
    if "relevant" in data:
        return _parse_original(data, source)
    raise InvalidInput(f"用例文件 {source} 既没有 memories 也没有 relevant，无法识别格式")


def _strs(value: object, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise InvalidInput(f"用例文件格式错误：{what} 必须是非空字符串数组")
    return tuple(value)


def _parse_dev(data: dict[str, Any], source: str) -> CaseSet:
    declared = _declared_workspaces(data.get("workspaces"))
    memories: list[CaseMemory] = []
    for i, raw in enumerate(data.get("memories") or []):
        if (
            not isinstance(raw, dict)
            or raw.get("group") not in GROUPS
            or not isinstance(raw.get("text"), str)
            or not isinstance(raw.get("key"), str)
        ):
            raise InvalidInput(f"用例文件格式错误：memories[{i}] 需要 key、group（rule/project）和 text")
        workspace = _workspace(raw, f"memories[{i}]", declared)
        memories.append(
            CaseMemory(
                raw["key"], raw["group"], raw["text"], check_applies_when(raw.get("appliesWhen")), workspace
            )
        )
    keys = {m.key: m for m in memories}
    if len(keys) != len(memories):
        raise InvalidInput("用例文件格式错误：memories 里有重复的 key")
    names = (
        declared
        if declared is not None
        else tuple(dict.fromkeys(m.workspace for m in memories if m.workspace))
    )
    relevant = []
    for i, raw in enumerate(data.get("relevant") or []):
        if not isinstance(raw, dict) or not isinstance(raw.get("prompt"), str):
            raise InvalidInput(f"用例文件格式错误：relevant[{i}] 需要 prompt 和 expect")
        expect = _strs(raw.get("expect"), f"relevant[{i}].expect")
        unknown = [k for k in expect if k not in keys]
        if unknown:
            raise InvalidInput(f"用例文件格式错误：relevant[{i}] 引用了不存在的记忆 {'、'.join(unknown)}")
        workspace = _workspace(raw, f"relevant[{i}]", names)
        hidden = [k for k in expect if keys[k].workspace not in ("", workspace)]
        if hidden:
            where = f"工作区 {workspace}" if workspace else "工作区之外"
            raise InvalidInput(
                f"用例文件格式错误：relevant[{i}] 在{where}提问，看不到它期望的记忆 {'、'.join(hidden)}"
                f"（属于工作区 {'、'.join(sorted({keys[k].workspace for k in hidden}))}）"
            )
        tags = _strs(raw["tags"], f"relevant[{i}].tags") if raw.get("tags") else ()
        relevant.append(RelevantCase(raw["prompt"], expect, workspace, tags))
    irrelevant = []
    for i, raw in enumerate(data.get("irrelevant") or []):
        if not isinstance(raw, dict) or not isinstance(raw.get("prompt"), str):
            raise InvalidInput(f"用例文件格式错误：irrelevant[{i}] 需要 prompt")
        near = _strs(raw["near"], f"irrelevant[{i}].near") if raw.get("near") else ()
        tags = _strs(raw["tags"], f"irrelevant[{i}].tags") if raw.get("tags") else ()
        irrelevant.append(
            IrrelevantCase(raw["prompt"], near, _workspace(raw, f"irrelevant[{i}]", names), tags)
        )
    single = []
    for i, raw in enumerate(data.get("single_memory") or []):
        mem = raw.get("memory") if isinstance(raw, dict) else None
        if (
            not isinstance(raw, dict)
            or not isinstance(mem, dict)
            or mem.get("group") not in GROUPS
            or not isinstance(mem.get("text"), str)
        ):
            raise InvalidInput(f"用例文件格式错误：single_memory[{i}].memory 需要 group 和 text")
        single.append(
            SingleCase(
                CaseMemory(
                    single_key(i),
                    mem["group"],
                    mem["text"],
                    check_applies_when(mem.get("appliesWhen")),
                    _workspace(mem, f"single_memory[{i}].memory", names),
                ),
                _strs(raw.get("relevant") or [], f"single_memory[{i}].relevant"),
                _strs(raw.get("irrelevant") or [], f"single_memory[{i}].irrelevant")
                if raw.get("irrelevant")
                else (),
                _workspace(raw, f"single_memory[{i}]", names),
            )
        )
    return CaseSet(
        "dev", source, tuple(memories), tuple(relevant), tuple(irrelevant), tuple(single), workspaces=names
    )


def _declared_workspaces(value: object) -> tuple[str, ...] | None:
    """The names of ``"workspaces"`` (``{name: description}`` or ``[names]``); None when absent."""
    if value is None:
        return None
    if isinstance(value, dict):
        names = list(value)
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        names = list(value)
    else:
        raise InvalidInput("用例文件格式错误：workspaces 应为 {工作区名: 说明} 对象或工作区名数组")
    for name in names:
        _check_name(name, "workspaces")
    if len(set(names)) != len(names):
        raise InvalidInput("用例文件格式错误：workspaces 里有重复的工作区名")
    return tuple(names)


def _workspace(raw: dict[str, Any], what: str, known: tuple[str, ...] | None) -> str:
    """The ``workspace`` of one entry ("" when absent or null). ``known``: the names it may use
    (None: any well-formed name, for memories of a file that declares none)."""
    value = raw.get("workspace")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidInput(f"用例文件格式错误：{what}.workspace 应为工作区名（字符串）或 null")
    _check_name(value, f"{what}.workspace")
    if known is not None and value not in known:
        listed = "、".join(known) if known else "无"
        raise InvalidInput(
            f"用例文件格式错误：{what}.workspace 是未知的工作区 {value}（已知的工作区：{listed}）"
        )
    return value


def _check_name(name: str, what: str) -> None:
    # A name becomes the last component of a workspace key (a path), so it must be one component.
    if not name.strip() or name != name.strip() or name in (".", "..") or "/" in name or "\\" in name:
        raise InvalidInput(
            f"用例文件格式错误：{what} 里的工作区名 {name!r} 无效（不能为空、不能含路径分隔符）"
        )


def single_key(position: int) -> str:
    """The key of the memory of the ``position``-th single-memory case (from 0): ``single00``."""
    return f"single{position:02d}"


def with_applies_when(cases: CaseSet, lines: dict[str, list[str]]) -> CaseSet:
    """The cases with each memory's appliesWhen taken from ``lines`` ({memory key: [requests]},
    ``singleNN`` for single-memory cases), replacing any the file had; a memory not named keeps
    its own."""
    from dataclasses import replace

    def put(memory: CaseMemory) -> CaseMemory:
        if memory.key not in lines:
            return memory
        return replace(memory, applies_when=check_applies_when(lines[memory.key]))

    return replace(
        cases,
        memories=tuple(put(m) for m in cases.memories),
        single=tuple(replace(c, memory=put(c.memory)) for c in cases.single),
    )


def load_applies_when(path: Path) -> dict[str, list[str]]:
    """An appliesWhen file: ``{memory key: [requests]}``."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InvalidInput(f"适用场景文件 {path} 读取失败：{exc}") from exc
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, list) and all(isinstance(x, str) for x in v)
        for k, v in data.items()
    ):
        raise InvalidInput(f"适用场景文件 {path} 应为 {{记忆 key: [请求, ...]}}")
    return data


def _parse_original(data: dict[str, Any], source: str) -> CaseSet:
    relevant = []
    for i, pair in enumerate(data.get("relevant") or []):
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) and p for p in pair)):
            raise InvalidInput(f'用例文件格式错误：relevant[{i}] 应为 ["输入", "期望记忆片段"]')
        relevant.append(RelevantCase(pair[0], (pair[1],)))
    raw_irr = data.get("irrelevant")
    prompts = _strs(raw_irr, "irrelevant") if raw_irr is not None else BUILTIN_IRRELEVANT
    min_hit = data.get("minHit")
    if min_hit is not None and (not isinstance(min_hit, int) or isinstance(min_hit, bool) or min_hit < 0):
        raise InvalidInput("用例文件格式错误：minHit 必须是非负整数")
    return CaseSet(
        "original", source, (), tuple(relevant), tuple(IrrelevantCase(p) for p in prompts), (), min_hit
    )
