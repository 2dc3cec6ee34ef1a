"""``memself verify``: run labelled recall cases and say whether recall is good enough.

The case files and their two formats are ``memself.verify.cases``; a set whose memories and
prompts belong to workspaces is also measured with and without workspace scoping
(``memself.verify.workspaces``).

Nothing is written anywhere: memory records are made in memory (``Memory.create``), vectors come
from ``recall.memory_side.encode_memories`` (what the vector index stores), and no reward is given.

Counting, per group: a relevant case counts for a group when it expects a memory of that group,
and is a hit for it when that group's recall returns one of its expected memories of that group.
An irrelevant prompt leaks a group when that group returns anything. A single-memory case is run
with a pool that holds only its memory. The sweep re-gates the same scores at every floor, so the
best line per group is exact for these cases.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memself.recall.gate import GateParams, gate_explained
from memself.recall.memory_side import encode_memories
from memself.recall.pool import RecallPool
from memself.store.records import GROUP_SHORT_LABELS, GROUPS, Memory
from memself.verify.cases import CaseSet, RelevantCase
from memself.verify.workspaces import WorkspaceReport, case_memory, run_workspaces
from memself.verify.workspaces import render_json as render_workspaces_json
from memself.verify.workspaces import render_text as render_workspaces_text

if TYPE_CHECKING:
    import numpy as np

    from memself.recall.fitting import SetScores, ShapeCounts
    from memself.recall.scoring import Recaller, ScoreParts

# Recall's targets (per group: hit rate >= goal while leak rate <= limit).
HIT_GOAL = {"project": 0.85, "rule": 0.80}
# Reports show project facts first: their targets are the stricter ones.
_REPORT_ORDER = tuple(reversed(GROUPS))
LEAK_LIMIT = {"project": 0.05, "rule": 0.20}
SINGLE_GOAL = 0.90


# ------------------------------------------------------------------------------------ results


@dataclass(frozen=True)
class Miss:
    prompt: str
    expected: tuple[str, ...]
    got: tuple[str, ...]  # what the group returned (texts)
    best_expected: float  # ungated score of the best expected memory
    top1: float | None


@dataclass(frozen=True)
class Leak:
    prompt: str
    texts: tuple[str, ...]
    near: bool


@dataclass
class GroupReport:
    group: str
    floor: float
    cases: int = 0
    hits: int = 0
    irrelevant: int = 0
    leaks: int = 0
    single_cases: int = 0
    single_hits: int = 0
    single_leaks: int = 0
    misses: list[Miss] = field(default_factory=list)
    leaked: list[Leak] = field(default_factory=list)

    @property
    def hit_rate(self) -> float:
        return self.hits / self.cases if self.cases else 0.0

    @property
    def leak_rate(self) -> float:
        return self.leaks / self.irrelevant if self.irrelevant else 0.0


@dataclass(frozen=True)
class SweepPoint:
    floor: float
    hits: int
    leaks: int
    single_hits: int


@dataclass(frozen=True)
class Target:
    name: str
    value: float
    goal: float
    at_most: bool
    met: bool


@dataclass
class VerifyResult:
    fmt: str
    source: str
    model: str
    params: GateParams
    groups: dict[str, GroupReport]
    sweep: dict[str, list[SweepPoint]]
    best: dict[str, SweepPoint | None]
    targets: list[Target]
    single_cases: int = 0
    single_hits: int = 0
    # original format only
    min_hit: int | None = None
    relevant_total: int = 0
    relevant_hits: int = 0
    harmful: int = 0
    unmatched: list[str] = field(default_factory=list)  # fragments no memory contains
    # dev format only: every signal of every case apart (memself.recall.fitting)
    scores: SetScores | None = None
    # How far above the floor a memory scored with appliesWhen views must score, per group, when
    # any memory of these cases was (else None).
    view_offset: dict[str, float] | None = None
    # A set whose memories and prompts belong to workspaces: recall with and without scoping.
    workspaces: WorkspaceReport | None = None
    # dev format only: per shape of prompt (short, english, the cases' tags; "all"), at the lines
    shapes: dict[str, ShapeCounts] | None = None

    @property
    def passed(self) -> bool:
        if self.fmt == "original":
            need = self.relevant_total if self.min_hit is None else self.min_hit
            return self.harmful == 0 and self.relevant_hits >= need
        return all(t.met for t in self.targets)


# ------------------------------------------------------------------------------------ running


@dataclass
class _Scored:
    """Ungated fused scores of one prompt over one pool, per group: ``[(memory, score)]``, and
    how far above the floor each memory must score (``extra``, by id: the view offset)."""

    prompt: str
    by_group: dict[str, list[tuple[Memory, float]]]  # best first
    extra: dict[str, float]


@dataclass
class _PoolRun:
    """The prompts of one pool, scored: the gate's view (``scored``) and every signal apart
    (``parts``, for the calibration)."""

    scored: list[_Scored]
    parts: list[ScoreParts]
    has_views: np.ndarray  # per memory: scored with its appliesWhen views


class _BatchEncoder:
    """The recaller's encoder, fed in batches: ``prime`` encodes every prompt view up front (one
    model call per batch instead of one per prompt), lookups after that are free."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dim = inner.dim
        self._cache: dict[str, np.ndarray] = {}

    def prime(self, texts: Sequence[str], batch: int = 64) -> None:
        todo = sorted({t for t in texts if t not in self._cache}, key=len)
        for start in range(0, len(todo), batch):
            chunk = todo[start : start + batch]
            for text, vector in zip(chunk, self.inner.encode_queries(chunk), strict=True):
                self._cache[text] = vector

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        self.prime(texts)
        return np.stack([self._cache[t] for t in texts])

    def encode_passages(self, texts: Sequence[str]) -> np.ndarray:
        return self.inner.encode_passages(texts)


def _batched(recaller: Recaller, prompts: Sequence[str]) -> Recaller:
    """A recaller like ``recaller`` whose encoder has every view of ``prompts`` encoded."""
    from memself.recall.scoring import Recaller, query_views

    encoder = _BatchEncoder(recaller.encoder)
    encoder.prime([v for p in prompts for v in query_views(p, recaller.scoring.sentence_views)])
    return Recaller(encoder, recaller.space, recaller.scoring)


def _prepare(recaller: Recaller, memories: Sequence[Memory]) -> tuple[RecallPool, np.ndarray]:
    """The pool and its matrix, as the index would hold them: each memory's text, then (when the
    model scores them) its appliesWhen requests as rows of their own."""
    import numpy as np

    texts = [m.text for m in memories]
    views: list[list[int]] = []
    for m in memories:
        found = []
        for request in m.appliesWhen if recaller.scoring.applies_when else ():
            found.append(len(texts))
            texts.append(request)
        views.append(found)
    matrix = (
        encode_memories(recaller.encoder, texts) if texts else np.zeros((0, recaller.encoder.dim), np.float32)
    )
    return RecallPool(memories, range(len(memories)), views), matrix


def _score_pool(recaller: Recaller, prompts: Sequence[str], memories: Sequence[Memory]) -> _PoolRun:
    pool, matrix = _prepare(recaller, memories)
    extra_arr = recaller.extra_floors(pool)
    extra = {m.id: float(x) for m, x in zip(pool.memories, extra_arr, strict=True)}
    key = object()  # the row norms of this matrix are computed once for all prompts
    views = pool.has_views if recaller.scoring.applies_when else pool.has_views & False
    run = _PoolRun([], [], views)
    for prompt in prompts:
        parts = recaller.parts(prompt, pool, matrix, matrix_key=key)
        fused = recaller.fused(parts, pool)
        by_group: dict[str, list[tuple[Memory, float]]] = {g: [] for g in GROUPS}
        for memory, score in zip(pool.memories, fused, strict=True):
            by_group[memory.category].append((memory, float(score)))
        for pairs in by_group.values():
            pairs.sort(key=lambda pair: pair[1], reverse=True)
        run.scored.append(_Scored(prompt, by_group, extra))
        run.parts.append(parts)
    return run


def _kept(scored: _Scored, group: str, floor: float, params: GateParams) -> list[Memory]:
    # Only the top k (and top2, for the margin) of a ranked group can matter to the gate.
    head = scored.by_group[group][: max(params.top_k, 2)]
    extra = (lambda m: scored.extra[m.id]) if any(scored.extra.values()) else None
    return [m for m, _ in gate_explained(head, floor, params.margin, params.top_k, extra).kept]


def _floor_grid(values: Sequence[float]) -> list[float]:
    """The scores that can change a count (those of each group's top k) plus a 0.01 grid."""
    grid = {round(x / 100, 2) for x in range(-20, 101)}
    grid.update(round(v, 4) for v in values)
    return sorted(grid)


def _memories(cases: CaseSet, now: datetime) -> list[Memory]:
    out = []
    for m in cases.memories:
        memory = case_memory(m.text, m.group, m.workspace, now)
        memory.appliesWhen = m.applies_when
        out.append(memory)
    return out


def run_cases(
    cases: CaseSet,
    recaller: Recaller,
    params: GateParams,
    now: datetime,
    pool: Sequence[Memory] = (),
    model: str = "",
) -> VerifyResult:
    """Score every case once, gate at the configured floors, sweep the floors, check targets.

    ``pool`` is used only for the original format (the user's active memories, read only). For
    the dev format the result also carries every signal apart (``scores``) for
    ``memself.recall.fitting``.
    """
    if cases.fmt == "dev":
        memories = _memories(cases, now)
        by_key = {m.key: mem for m, mem in zip(cases.memories, memories, strict=True)}
    else:
        memories = [m for m in pool if m.active]
        by_key = {}
    prompts = [c.prompt for c in cases.relevant] + [c.prompt for c in cases.irrelevant]
    prompts += [p for sc in cases.single for p in (*sc.relevant, *sc.irrelevant)]
    recaller = _batched(recaller, prompts)
    main = _score_pool(recaller, [c.prompt for c in cases.relevant + cases.irrelevant], memories)
    rel, irr = main.scored[: len(cases.relevant)], main.scored[len(cases.relevant) :]

    def expected(case: RelevantCase, group: str) -> set[str]:
        """Ids of this case's expected memories in ``group``."""
        if cases.fmt == "dev":
            return {by_key[k].id for k in case.expect if by_key[k].category == group}
        return {m.id for m in memories if m.category == group and any(frag in m.text for frag in case.expect)}

    single: list[tuple[str, list[_Scored], list[_Scored]]] = []
    single_runs: list[tuple[_PoolRun, _PoolRun]] = []
    singles: list[Memory] = []
    for sc in cases.single:
        mem = case_memory(sc.memory.text, sc.memory.group, sc.memory.workspace, now)
        mem.appliesWhen = sc.memory.applies_when
        singles.append(mem)
        r, i = _score_pool(recaller, sc.relevant, [mem]), _score_pool(recaller, sc.irrelevant, [mem])
        single.append((mem.category, r.scored, i.scored))
        single_runs.append((r, i))

    groups = {
        g: _group_report(g, params.floors[g], cases, rel, irr, single, expected, params) for g in GROUPS
    }
    sweep, best = {}, {}
    for g in GROUPS:
        head = max(params.top_k, 1)
        ranked = [sc for sc in rel + irr] + [sc for grp, r, i in single if grp == g for sc in r + i]
        scores = [s - sc.extra[m.id] * k for sc in ranked for m, s in sc.by_group[g][:head] for k in (0, 1)]
        points = []
        for floor in _floor_grid(scores):
            rep = _group_report(g, floor, cases, rel, irr, single, expected, params, detail=False)
            points.append(SweepPoint(floor, rep.hits, rep.leaks, rep.single_hits))
        sweep[g] = points
        best[g] = _best_line(points, groups[g].cases, groups[g].irrelevant, LEAK_LIMIT[g])
    result = VerifyResult(cases.fmt, cases.source, model, params, groups, sweep, best, [])
    if main.has_views.any() or any(r.has_views.any() for r, _ in single_runs):
        result.view_offset = dict(recaller.scoring.view_offset)
    result.single_cases = sum(groups[g].single_cases for g in GROUPS)
    result.single_hits = sum(groups[g].single_hits for g in GROUPS)
    if cases.fmt == "dev" and cases.workspaces:
        result.workspaces = run_workspaces(
            cases, memories, singles, recaller, params, lambda pool: _prepare(recaller, pool)
        )
    if cases.fmt == "dev":
        result.targets = _targets(result)
        result.scores = _set_scores(cases, memories, main, single_runs)
        result.shapes = _shape_counts(cases, rel, irr, expected, params)
    else:
        _original_summary(result, cases, rel, irr, memories, params)
    return result


def _set_scores(
    cases: CaseSet,
    memories: Sequence[Memory],
    main: _PoolRun,
    single_runs: Sequence[tuple[_PoolRun, _PoolRun]],
) -> SetScores:
    """Every signal of every case apart, for ``memself.recall.fitting``."""
    import numpy as np

    from memself.recall.fitting import Block, SetScores

    codes = {g: i for i, g in enumerate(GROUPS)}
    position = {m.key: i for i, m in enumerate(cases.memories)}
    dim = len(main.parts[0].vector) if main.parts else 0

    def block(parts: Sequence[ScoreParts], width: int, texts: Sequence[str]) -> Block:
        def stack(name: str) -> np.ndarray:
            if not parts:
                return np.zeros((0, width), np.float32)
            return np.stack([getattr(p, name) for p in parts]).astype(np.float32)

        vectors = np.stack([p.vector for p in parts]) if parts else np.zeros((0, dim), np.float32)
        return Block(
            stack("dense_text"),
            stack("dense"),
            stack("lexical_text"),
            stack("lexical"),
            vectors,
            stack("entity"),
            tuple(texts),
        )

    rel_owner, irr_owner, rel_parts, irr_parts = [], [], [], []
    rel_texts: list[str] = []
    irr_texts: list[str] = []
    for k, ((r, i), case) in enumerate(zip(single_runs, cases.single, strict=True)):
        rel_parts += r.parts
        irr_parts += i.parts
        rel_texts += case.relevant
        irr_texts += case.irrelevant
        rel_owner += [k] * len(r.parts)
        irr_owner += [k] * len(i.parts)
    from memself.recall.shape import prompt_shapes

    name = Path(cases.source).stem if cases.source else "cases"
    prompts = [c.prompt for c in cases.relevant] + [c.prompt for c in cases.irrelevant]
    shapes = [prompt_shapes(c.prompt, c.tags) for c in cases.relevant]
    shapes += [prompt_shapes(c.prompt, c.tags) for c in cases.irrelevant]
    return SetScores(
        name=name,
        group=np.array([codes[m.category] for m in memories], dtype=np.int8),
        has_views=main.has_views,
        pool=block(main.parts, len(memories), prompts),
        n_relevant=len(cases.relevant),
        expect=[np.array([position[k] for k in c.expect], dtype=np.int64) for c in cases.relevant],
        single_group=np.array([codes[c.memory.group] for c in cases.single], dtype=np.int8),
        single_views=np.array([bool(r.has_views[0]) for r, _ in single_runs], dtype=bool),
        single_rel=block(rel_parts, 1, rel_texts),
        single_rel_owner=np.array(rel_owner, dtype=np.int64),
        single_irr=block(irr_parts, 1, irr_texts),
        single_irr_owner=np.array(irr_owner, dtype=np.int64),
        shapes=shapes,
    )


def _shape_counts(
    cases: CaseSet, rel: list[_Scored], irr: list[_Scored], expected: Any, params: GateParams
) -> dict[str, ShapeCounts]:
    """Per shape of prompt, through the gate at the configured lines: relevant prompts that
    recalled at least one memory they need (any group), unrelated prompts that recalled something."""
    from memself.recall.fitting import ShapeCounts
    from memself.recall.shape import prompt_shapes

    out: dict[str, ShapeCounts] = {}

    def add(names: tuple[str, ...], one: ShapeCounts) -> None:
        for name in ("all", *names):
            out[name] = out[name] + one if name in out else one

    none = {g: 0 for g in GROUPS}
    for case, scored in zip(cases.relevant, rel, strict=True):
        hit = any(
            expected(case, g) & {m.id for m in _kept(scored, g, params.floors[g], params)} for g in GROUPS
        )
        add(prompt_shapes(case.prompt, case.tags), ShapeCounts(int(hit), 1, none, 0))
    for other, scored in zip(cases.irrelevant, irr, strict=True):
        leaks = {g: int(bool(_kept(scored, g, params.floors[g], params))) for g in GROUPS}
        add(prompt_shapes(other.prompt, other.tags), ShapeCounts(0, 0, leaks, 1))
    return out


SHAPE_NAMES = {
    "all": "全部提问",
    "short": "短问（不超过 4 个词）",
    "english": "英文提问",
    "shorthand": "缩写和简称",
}


def shape_lines(shapes: dict[str, ShapeCounts], indent: str = "  ") -> list[str]:
    """One line per shape: relevant prompts that found a memory they need, unrelated prompts that
    leaked, per group."""
    out = []
    for name in sorted(shapes, key=lambda n: (n != "all", n)):
        c = shapes[name]
        out.append(
            f"{indent}{SHAPE_NAMES.get(name, name)}：需要记忆的提问找到至少一条 {_pct(c.hits, c.cases)}；"
            f"无关提问带出规则 {_pct(c.leaks.get('rule', 0), c.irrelevant)}、"
            f"项目事实 {_pct(c.leaks.get('project', 0), c.irrelevant)}"
        )
    return out


def shapes_json(shapes: dict[str, ShapeCounts]) -> dict[str, Any]:
    """``{shape: {hits, cases, leaks: {rule, project}, irrelevant}}``, ``all`` first."""
    order = sorted(shapes, key=lambda name: (name != "all", name))
    return {
        name: {
            "hits": shapes[name].hits,
            "cases": shapes[name].cases,
            "leaks": {g: shapes[name].leaks.get(g, 0) for g in GROUPS},
            "irrelevant": shapes[name].irrelevant,
        }
        for name in order
    }


def _group_report(
    group: str,
    floor: float,
    cases: CaseSet,
    rel: list[_Scored],
    irr: list[_Scored],
    single: list[tuple[str, list[_Scored], list[_Scored]]],
    expected: Any,
    params: GateParams,
    detail: bool = True,
) -> GroupReport:
    rep = GroupReport(group, floor)
    for case, scored in zip(cases.relevant, rel, strict=True):
        want = expected(case, group)
        if not want:
            continue
        rep.cases += 1
        kept = _kept(scored, group, floor, params)
        if want & {m.id for m in kept}:
            rep.hits += 1
        elif detail:
            ranked = scored.by_group[group]
            best = max((s for m, s in ranked if m.id in want), default=float("nan"))
            rep.misses.append(
                Miss(
                    case.prompt,
                    tuple(m.text for m, _ in ranked if m.id in want),
                    tuple(m.text for m in kept),
                    best,
                    ranked[0][1] if ranked else None,
                )
            )
    for other, scored in zip(cases.irrelevant, irr, strict=True):
        rep.irrelevant += 1
        kept = _kept(scored, group, floor, params)
        if kept:
            rep.leaks += 1
            if detail:
                rep.leaked.append(Leak(other.prompt, tuple(m.text for m in kept), bool(other.near)))
    for grp, r, i in single:
        if grp != group:
            continue
        for scored in r:
            rep.single_cases += 1
            rep.single_hits += bool(_kept(scored, group, floor, params))
        for scored in i:
            rep.single_leaks += bool(_kept(scored, group, floor, params))
    return rep


def _best_line(points: list[SweepPoint], cases: int, irrelevant: int, limit: float) -> SweepPoint | None:
    """Most hits with leaks within the limit; then fewest leaks; then the middle of that run of
    floors (the robust choice: equally far from both edges of the plateau)."""
    allowed = [p for p in points if not irrelevant or p.leaks <= limit * irrelevant + 1e-9]
    if not allowed or not cases:
        return None
    top = max(p.hits for p in allowed)
    least = min(p.leaks for p in allowed if p.hits == top)
    run = [p for p in allowed if p.hits == top and p.leaks == least]
    return run[len(run) // 2]


def single_goal_lines(result: VerifyResult) -> tuple[SweepPoint, SweepPoint] | None:
    """The (rule, project) lines of the sweep that reach the single-memory goal with the least
    leaking (the worse group's leaks as a share of its limit; then more relevant hits), or None
    when no pair of lines reaches it. Shows what the single-memory goal would cost in leaks when
    the shipped lines miss it."""
    import math

    if not result.single_cases:
        return None
    need = math.ceil(SINGLE_GOAL * result.single_cases - 1e-9)
    best: tuple[tuple[float, int], SweepPoint, SweepPoint] | None = None
    irrelevant = {g: max(result.groups[g].irrelevant, 1) for g in GROUPS}
    for rule in result.sweep["rule"]:
        for project in result.sweep["project"]:
            if rule.single_hits + project.single_hits < need:
                continue
            worse = max(
                rule.leaks / (LEAK_LIMIT["rule"] * irrelevant["rule"]),
                project.leaks / (LEAK_LIMIT["project"] * irrelevant["project"]),
            )
            key = (worse, -(rule.hits + project.hits))
            if best is None or key < best[0]:
                best = (key, rule, project)
    return None if best is None else (best[1], best[2])


def _targets(result: VerifyResult) -> list[Target]:
    out = []
    for g in _REPORT_ORDER:
        rep = result.groups[g]
        out.append(
            Target(
                f"{g}-hits", rep.hit_rate, HIT_GOAL[g], False, rep.cases > 0 and rep.hit_rate >= HIT_GOAL[g]
            )
        )
        out.append(
            Target(f"{g}-leaks", rep.leak_rate, LEAK_LIMIT[g], True, rep.leak_rate <= LEAK_LIMIT[g] + 1e-9)
        )
    rate = result.single_hits / result.single_cases if result.single_cases else 0.0
    out.append(
        Target("single-hits", rate, SINGLE_GOAL, False, result.single_cases > 0 and rate >= SINGLE_GOAL)
    )
    ws = result.workspaces
    if ws is not None:
        scoped, reference = ws.modes["scoped"], ws.modes["reference"]
        out.append(Target("workspace-leaks", scoped.leak_rate, 0.0, True, scoped.leaks == 0))
        # Met when no case the reference hits is missed with scoping (the rates could hide a swap).
        out.append(
            Target(
                "workspace-hits",
                _rate(scoped.in_workspace_hits, scoped.in_workspace_cases),
                _rate(reference.in_workspace_hits, reference.in_workspace_cases),
                False,
                not ws.lost,
            )
        )
    return out


def _rate(n: int, d: int) -> float:
    return n / d if d else 0.0


def _original_summary(
    result: VerifyResult,
    cases: CaseSet,
    rel: list[_Scored],
    irr: list[_Scored],
    memories: Sequence[Memory],
    params: GateParams,
) -> None:
    """The original's pass rule: a relevant input passes when a hit's text contains its fragment;
    an irrelevant input with any project hit is harmful."""
    result.min_hit = cases.min_hit
    result.relevant_total = len(cases.relevant)
    for case, scored in zip(cases.relevant, rel, strict=True):
        frag = case.expect[0]
        if not any(frag in m.text for m in memories):
            result.unmatched.append(frag)
        hits = [m for g in GROUPS for m in _kept(scored, g, params.floors[g], params)]
        result.relevant_hits += any(frag in m.text for m in hits)
    result.harmful = sum(bool(_kept(s, "project", params.floors["project"], params)) for s in irr)


# ---------------------------------------------------------------------------------- rendering


def _pct(n: int, d: int) -> str:
    return f"{n}/{d}（{n / d:.0%}）" if d else "0/0"


def render_text(result: VerifyResult, max_items: int = 8) -> str:
    """The human report, in Chinese."""
    p = result.params
    lines = [
        f"召回验证：{result.source}（模型 {result.model or '未知'}）",
        f"当前阈值：规则 {p.floors['rule']:g}，项目事实 {p.floors['project']:g}，"
        f"margin {p.margin:g}，每组最多 {p.top_k} 条",
    ]
    if result.view_offset is not None:
        offset = result.view_offset
        lines.append(f"带适用场景的记忆另加：规则 {offset['rule']:g}，项目事实 {offset['project']:g}")
    if result.workspaces is not None:
        lines.append("以下各组不分工作区计数（所有记忆都可见）；分工作区的结果在后面")
    lines.append("")
    if result.fmt == "original":
        need = result.relevant_total if result.min_hit is None else result.min_hit
        lines.append(
            f"相关输入命中 {result.relevant_hits}/{result.relevant_total}（要求 ≥ {need}）；"
            f"无关输入带出项目事实 {result.harmful} 条（要求 0）"
        )
        if result.unmatched:
            lines.append("以下期望片段不在任何记忆里：" + "、".join(result.unmatched[:max_items]))
    for g in _REPORT_ORDER:
        rep = result.groups[g]
        name = GROUP_SHORT_LABELS[g]
        lines.append(
            f"【{name}】相关命中 {_pct(rep.hits, rep.cases)}，"
            f"无关输入泄漏 {_pct(rep.leaks, rep.irrelevant)}"
            + (f"，单条记忆命中 {_pct(rep.single_hits, rep.single_cases)}" if rep.single_cases else "")
        )
        for miss in rep.misses[:max_items]:
            lines.append(
                f"  未命中：{miss.prompt}（期望记忆最高分 {miss.best_expected:.3f}，"
                f"本组第一 {miss.top1 if miss.top1 is None else round(miss.top1, 3)}）"
            )
        for leak in rep.leaked[:max_items]:
            tag = "（近邻干扰）" if leak.near else ""
            lines.append(f"  泄漏{tag}：{leak.prompt} → {leak.texts[0][:40]}")
        best = result.best[g]
        if best is not None:
            lines.append(
                f"  阈值扫描：泄漏不超过 {LEAK_LIMIT[g]:.0%} 时最好的线是 {best.floor:.3f}，"
                f"命中 {_pct(best.hits, rep.cases)}，泄漏 {_pct(best.leaks, rep.irrelevant)}"
                + (f"，单条 {best.single_hits}/{rep.single_cases}" if rep.single_cases else "")
            )
        else:
            lines.append(f"  阈值扫描：没有哪条线能把泄漏压到 {LEAK_LIMIT[g]:.0%} 以内")
        lines.append("")
    if result.single_cases:
        lines.append(f"单条记忆召回：{_pct(result.single_hits, result.single_cases)}")
        if result.single_hits < SINGLE_GOAL * result.single_cases - 1e-9:
            needed = single_goal_lines(result)
            if needed is None:
                lines.append(f"  任何阈值都无法让单条记忆召回达到 {SINGLE_GOAL:.0%}")
            else:
                rule, project = needed
                lines.append(
                    f"  要让单条记忆达到 {SINGLE_GOAL:.0%}，泄漏最少的组合是规则线 {rule.floor:.3f}"
                    f"（无关输入泄漏 {_pct(rule.leaks, result.groups['rule'].irrelevant)}）、"
                    f"项目事实线 {project.floor:.3f}"
                    f"（无关输入泄漏 {_pct(project.leaks, result.groups['project'].irrelevant)}）"
                )
    if result.shapes is not None:
        lines.append("按提问形态：")
        lines += shape_lines(result.shapes)
        lines.append("")
    if result.workspaces is not None:
        lines += render_workspaces_text(result.workspaces, max_items)
        lines.append("")
    if result.targets:
        lines.append("目标：")
        for t in result.targets:
            sign = "≤" if t.at_most else "≥"
            lines.append(
                f"  {'✓' if t.met else '✗'} {_TARGET_NAMES[t.name]} {t.value:.0%}（目标 {sign} {t.goal:.0%}）"
            )
    lines.append("结论：" + ("通过" if result.passed else "未通过"))
    return "\n".join(lines)


_TARGET_NAMES = {
    "project-hits": "项目事实命中率",
    "project-leaks": "项目事实泄漏率",
    "rule-hits": "规则命中率",
    "rule-leaks": "规则泄漏率",
    "single-hits": "单条记忆命中率",
    "workspace-leaks": "分工作区时的跨工作区泄漏率",
    "workspace-hits": "分工作区时的本工作区命中率（对照全部当作全局）",
}


def _goal_lines_json(result: VerifyResult) -> dict[str, Any] | None:
    needed = single_goal_lines(result)
    if needed is None:
        return None
    return {
        g: {"floor": p.floor, "hits": p.hits, "leaks": p.leaks, "singleHits": p.single_hits}
        for g, p in zip(GROUPS, needed, strict=True)
    }


def render_json(result: VerifyResult) -> dict[str, Any]:
    """The ``--json`` form: counts, the sweep's best lines, targets and the verdict."""

    def group(rep: GroupReport) -> dict[str, Any]:
        best = result.best[rep.group]
        return {
            "floor": rep.floor,
            "cases": rep.cases,
            "hits": rep.hits,
            "irrelevant": rep.irrelevant,
            "leaks": rep.leaks,
            "singleCases": rep.single_cases,
            "singleHits": rep.single_hits,
            "singleLeaks": rep.single_leaks,
            "misses": [
                {
                    "prompt": m.prompt,
                    "bestExpected": round(m.best_expected, 4),
                    "top1": None if m.top1 is None else round(m.top1, 4),
                }
                for m in rep.misses
            ],
            "leaked": [{"prompt": lk.prompt, "texts": list(lk.texts), "near": lk.near} for lk in rep.leaked],
            "best": None
            if best is None
            else {
                "floor": best.floor,
                "hits": best.hits,
                "leaks": best.leaks,
                "singleHits": best.single_hits,
            },
            "sweep": [[p.floor, p.hits, p.leaks, p.single_hits] for p in result.sweep[rep.group]],
        }

    out: dict[str, Any] = {
        "format": result.fmt,
        "source": result.source,
        "model": result.model,
        "topK": result.params.top_k,
        "margin": result.params.margin,
        "viewOffset": result.view_offset,
        "rule": group(result.groups["rule"]),
        "project": group(result.groups["project"]),
        "single": {
            "cases": result.single_cases,
            "hits": result.single_hits,
            "goalLines": _goal_lines_json(result),
        },
        "targets": [
            {"name": t.name, "value": round(t.value, 4), "goal": t.goal, "atMost": t.at_most, "met": t.met}
            for t in result.targets
        ],
        "passed": result.passed,
    }
    if result.shapes is not None:
        out["shapes"] = shapes_json(result.shapes)
    if result.workspaces is not None:
        out["workspaces"] = render_workspaces_json(result.workspaces)
    if result.fmt == "original":
        out["original"] = {
            "relevant": result.relevant_total,
            "hits": result.relevant_hits,
            "minHit": result.min_hit,
            "harmful": result.harmful,
            "unmatched": result.unmatched,
        }
    return out
