"""Workspace scoping, measured on a case set whose memories and prompts belong to workspaces.

Every prompt of the set (relevant, unrelated, and the single-memory cases') is recalled three
times through the product's own recall (``Recaller.recall``, which scopes with
``RecallPool.members``); the set's workspace names become keys with ``workspace_key``:

- ``scoped``: as memself recalls, from the prompt's workspace (its key; "" when the prompt is
  asked outside any): the global memories and that workspace's;
- ``unscoped``: every memory visible (``workspace=None``), as before workspaces existed;
- ``reference``: the same memories, all made global, asked from the prompt's workspace: as if
  everything were in one workspace. "No loss of in-workspace hits" is checked against it.

Counted per mode:

- cross-workspace leaks: prompts that recall a memory of a workspace other than the one they are
  asked from (any workspace's, for a prompt asked outside every workspace), out of the prompts
  whose pool holds such a memory at all (for a single-memory case: its memory is another
  workspace's). In the reference a memory still counts as its workspace's in the set;
- in-workspace hits, per group as ``memself.verify.run`` counts hits: a relevant prompt counts for a
  group when it expects a memory of that group, and is a hit when that group's recall returns one
  of them (``memself.verify.cases`` only lets a prompt expect memories its workspace sees); a
  single-memory prompt whose workspace sees the memory is a hit when the memory is recalled.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memself.store.records import GROUP_SHORT_LABELS, GROUPS, Memory
from memself.store.workspaces import Workspace

if TYPE_CHECKING:
    import numpy as np

    from memself.recall.gate import GateParams
    from memself.recall.pool import RecallPool
    from memself.recall.scoring import Recaller
    from memself.verify.cases import CaseSet

MODES = ("scoped", "unscoped", "reference")
KINDS = ("relevant", "irrelevant", "single")
KIND_LABELS = {"relevant": "相关输入", "irrelevant": "无关输入", "single": "单条记忆用例"}
MODE_LABELS = {
    "scoped": "分工作区",
    "unscoped": "不分工作区（所有记忆都可见）",
    "reference": "参照：全部记忆当作全局",
}
# Where the fake workspace roots of a case set live: any absolute path works, since nothing is
# read there; a fixed one keeps the keys the same from run to run.
_ROOT = os.path.join(os.path.abspath(os.sep), "memself-verify")

Prepare = Callable[[Sequence[Memory]], "tuple[RecallPool, np.ndarray]"]


def workspace_key(name: str) -> str:
    """The key that stands for the set's workspace ``name``: an absolute path ending in it."""
    return os.path.join(_ROOT, name)


def workspace_of_name(name: str) -> Workspace | None:
    """The workspace of a memory or prompt of the set (None for "": global / outside any)."""
    return Workspace(workspace_key(name), name) if name else None


@dataclass(frozen=True)
class CrossLeak:
    prompt: str
    workspace: str  # the name it was asked from ("": outside every workspace)
    memory: str  # the recalled memory's key
    memory_workspace: str
    text: str


@dataclass
class ModeCounts:
    """One mode's counts; ``hit_ids`` names every hit (``relevant:3:rule``, ``single:0:2``) so
    two modes can be compared case by case."""

    prompts: int = 0
    leaks: int = 0
    # The same split by the kind of prompt: relevant, irrelevant, single (single-memory cases').
    kind_prompts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    kind_leaks: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    cases: dict[str, int] = field(default_factory=lambda: dict.fromkeys(GROUPS, 0))
    hits: dict[str, int] = field(default_factory=lambda: dict.fromkeys(GROUPS, 0))
    single_cases: int = 0
    single_hits: int = 0
    leaked: list[CrossLeak] = field(default_factory=list)
    hit_ids: set[str] = field(default_factory=set)

    @property
    def leak_rate(self) -> float:
        return self.leaks / self.prompts if self.prompts else 0.0

    @property
    def in_workspace_hits(self) -> int:
        return sum(self.hits.values()) + self.single_hits

    @property
    def in_workspace_cases(self) -> int:
        return sum(self.cases.values()) + self.single_cases


@dataclass(frozen=True)
class Difference:
    """A hit one mode has and the reference has not (or the other way round)."""

    hit_id: str
    prompt: str
    workspace: str


@dataclass
class WorkspaceReport:
    names: tuple[str, ...]
    modes: dict[str, ModeCounts]
    lost: list[Difference]  # hits of the reference that scoping does not get
    gained: list[Difference]  # hits scoping gets that the reference does not

    @property
    def keys(self) -> dict[str, str]:
        return {n: workspace_key(n) for n in self.names}


def case_memory(text: str, group: str, workspace: str, now: datetime) -> Memory:
    """A memory of the set, in the workspace its name stands for."""
    return Memory.create(text, group, now, workspace=workspace_of_name(workspace))


class _Pools:
    """One pool of the set's memories as each mode sees it: the memories as they are, and the
    same memories made global (the reference), each with its matrix."""

    def __init__(self, memories: Sequence[Memory], prepare: Prepare) -> None:
        self.home = {m.id: m.workspaceName for m in memories}
        self.pool, self.matrix = prepare(memories)
        flat = [copy.copy(m) for m in memories]
        for m in flat:
            m.set_workspace(None)
        self.flat_pool, self.flat_matrix = prepare(flat)
        self._keys = (object(), object())

    def exposed(self, workspace: str) -> bool:
        """Whether a prompt asked from ``workspace`` has another workspace's memory in the pool."""
        return any(name and name != workspace for name in self.home.values())

    def recall(
        self, recaller: Recaller, params: GateParams, mode: str, prompt: str, workspace: str
    ) -> dict[str, list[str]]:
        """The ids each group recalls for ``prompt`` asked from ``workspace`` (a name) in ``mode``."""
        key = workspace_key(workspace) if workspace else ""
        if mode == "reference":
            result = recaller.recall(
                prompt, self.flat_pool, self.flat_matrix, params, matrix_key=self._keys[1], workspace=key
            )
        else:
            result = recaller.recall(
                prompt,
                self.pool,
                self.matrix,
                params,
                matrix_key=self._keys[0],
                workspace=key if mode == "scoped" else None,
            )
        return {g: [h.id for h in result.groups[g].hits] for g in GROUPS}


def run_workspaces(
    cases: CaseSet,
    memories: Sequence[Memory],
    singles: Sequence[Memory],
    recaller: Recaller,
    params: GateParams,
    prepare: Prepare,
) -> WorkspaceReport:
    """The three modes over the set. ``memories`` are the set's memories in file order and
    ``singles`` the single-memory cases' (both made by ``case_memory``); ``prepare`` builds a
    pool and its matrix as the index would (``memself.verify.run``)."""
    ids = {m.key: mem.id for m, mem in zip(cases.memories, memories, strict=True)}
    keys = {mem.id: m.key for m, mem in zip(cases.memories, memories, strict=True)}
    keys.update((mem.id, c.memory.key) for c, mem in zip(cases.single, singles, strict=True))
    texts = {m.id: m.text for m in (*memories, *singles)}
    modes = {mode: ModeCounts() for mode in MODES}
    prompts: dict[str, tuple[str, str]] = {}

    def count_leaks(
        counts: ModeCounts, kind: str, pools: _Pools, prompt: str, workspace: str, got: list[str]
    ) -> None:
        if not pools.exposed(workspace):
            return
        foreign = [i for i in got if pools.home[i] and pools.home[i] != workspace]
        counts.prompts += 1
        counts.leaks += bool(foreign)
        counts.kind_prompts[kind] += 1
        counts.kind_leaks[kind] += bool(foreign)
        counts.leaked += [CrossLeak(prompt, workspace, keys[i], pools.home[i], texts[i]) for i in foreign]

    main = _Pools(memories, prepare)
    groups = {m.key: m.group for m in cases.memories}
    for n, case in enumerate(cases.relevant):
        want = {g: {ids[k] for k in case.expect if groups[k] == g} for g in GROUPS}
        for mode in MODES:
            got = main.recall(recaller, params, mode, case.prompt, case.workspace)
            counts = modes[mode]
            count_leaks(
                counts, "relevant", main, case.prompt, case.workspace, [i for g in GROUPS for i in got[g]]
            )
            for g in GROUPS:
                if want[g]:
                    counts.cases[g] += 1
                    if want[g] & set(got[g]):
                        counts.hits[g] += 1
                        counts.hit_ids.add(f"relevant:{n}:{g}")
        for g in GROUPS:
            prompts[f"relevant:{n}:{g}"] = (case.prompt, case.workspace)
    for other in cases.irrelevant:
        for mode in MODES:
            got = main.recall(recaller, params, mode, other.prompt, other.workspace)
            count_leaks(
                modes[mode],
                "irrelevant",
                main,
                other.prompt,
                other.workspace,
                [i for g in GROUPS for i in got[g]],
            )
    for n, (single, memory) in enumerate(zip(cases.single, singles, strict=True)):
        pools = _Pools([memory], prepare)
        for j, prompt in enumerate((*single.relevant, *single.irrelevant)):
            sees = j < len(single.relevant) and not pools.exposed(single.workspace)
            prompts[f"single:{n}:{j}"] = (prompt, single.workspace)
            for mode in MODES:
                kept = pools.recall(recaller, params, mode, prompt, single.workspace)[memory.category]
                counts = modes[mode]
                count_leaks(counts, "single", pools, prompt, single.workspace, kept)
                if sees:
                    counts.single_cases += 1
                    if memory.id in kept:
                        counts.single_hits += 1
                        counts.hit_ids.add(f"single:{n}:{j}")
    scoped, reference = modes["scoped"].hit_ids, modes["reference"].hit_ids

    def differences(found: set[str]) -> list[Difference]:
        return [Difference(h, *prompts[h]) for h in sorted(found, key=_order)]

    return WorkspaceReport(
        cases.workspaces, modes, differences(reference - scoped), differences(scoped - reference)
    )


def _order(hit_id: str) -> tuple[str, int, str]:
    kind, n, rest = hit_id.split(":")
    return kind, int(n), rest


# ---------------------------------------------------------------------------------- rendering


def _pct(n: int, d: int) -> str:
    return f"{n}/{d}（{n / d:.0%}）" if d else "0/0"


def render_text(report: WorkspaceReport, max_items: int = 8) -> list[str]:
    """The workspace section of ``memself verify``'s report, in Chinese."""
    lines = [f"工作区隔离（{len(report.names)} 个工作区：{'、'.join(report.names) or '无'}）："]
    for mode in MODES:
        c = report.modes[mode]
        hits = "，".join(f"{GROUP_SHORT_LABELS[g]} {_pct(c.hits[g], c.cases[g])}" for g in GROUPS)
        single = f"，单条记忆 {_pct(c.single_hits, c.single_cases)}" if c.single_cases else ""
        kinds = "，".join(
            f"{KIND_LABELS[k]} {c.kind_leaks[k]}/{c.kind_prompts[k]}" for k in KINDS if c.kind_prompts[k]
        )
        lines.append(
            f"  {MODE_LABELS[mode]}：跨工作区泄漏 {_pct(c.leaks, c.prompts)}（{kinds}）；"
            f"本工作区命中：{hits}{single}"
        )
    lost = report.lost
    if lost:
        lines.append(f"  分工作区比参照少命中 {len(lost)} 处：")
        lines += [f"    {_where(d.workspace)} {d.prompt}" for d in lost[:max_items]]
    else:
        lines.append("  分工作区没有比参照少命中任何一处")
    if report.gained:
        lines.append(f"  分工作区比参照多命中 {len(report.gained)} 处（别的工作区的记忆不再挤占名额）")
    for mode, label in (("unscoped", "不分工作区时的泄漏"), ("scoped", "分工作区仍泄漏")):
        for leak in report.modes[mode].leaked[:max_items]:
            lines.append(
                f"  {label}：{_where(leak.workspace)} {leak.prompt} → "
                f"[{leak.memory_workspace}] {leak.text[:40]}"
            )
    return lines


def _where(workspace: str) -> str:
    return f"[{workspace}]" if workspace else "[工作区外]"


def render_json(report: WorkspaceReport) -> dict[str, Any]:
    def mode(c: ModeCounts) -> dict[str, Any]:
        return {
            "prompts": c.prompts,
            "leaks": c.leaks,
            "leakRate": round(c.leak_rate, 4),
            "byKind": {k: {"prompts": c.kind_prompts[k], "leaks": c.kind_leaks[k]} for k in KINDS},
            **{g: {"cases": c.cases[g], "hits": c.hits[g]} for g in GROUPS},
            "single": {"cases": c.single_cases, "hits": c.single_hits},
            "leaked": [
                {
                    "prompt": lk.prompt,
                    "workspace": lk.workspace or None,
                    "memory": lk.memory,
                    "memoryWorkspace": lk.memory_workspace,
                }
                for lk in c.leaked
            ],
        }

    def diff(d: Difference) -> dict[str, Any]:
        return {"case": d.hit_id, "prompt": d.prompt, "workspace": d.workspace or None}

    return {
        "names": list(report.names),
        "keys": report.keys,
        **{m: mode(report.modes[m]) for m in MODES},
        "lost": [diff(d) for d in report.lost],
        "gained": [diff(d) for d in report.gained],
    }
