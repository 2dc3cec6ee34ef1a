"""``memself verify`` on several case sets: each set at the configured lines, and leave-one-set-out.

Leave-one-set-out (``memself.recall.fitting.loso``): for each set, the shipped calibration
procedure runs on all the other sets, and the set left out is counted at what it found. Its mean
over the sets is what to expect on memories and prompts the numbers were not fitted to; a set's
figures at the shipped lines are optimistic when the shipped numbers were calibrated on it.

With appliesWhen views (in the case files, or added with ``--applies-when``), the held-out set is
counted twice: without its views (every memory as a memory without appliesWhen scores) and with
them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memself.store.records import GROUP_SHORT_LABELS, GROUPS
from memself.verify.run import VerifyResult, render_json, run_cases, shape_lines, shapes_json

if TYPE_CHECKING:
    from datetime import datetime

    from memself.recall.fitting import Calibration, Counts, Fold
    from memself.recall.gate import GateParams
    from memself.recall.scoring import Recaller
    from memself.verify.cases import CaseSet


@dataclass
class SetsResult:
    model: str
    params: GateParams
    view_offset: dict[str, float]
    results: list[VerifyResult]
    folds: list[Fold]
    calibration: Calibration

    @property
    def names(self) -> list[str]:
        return [r.scores.name if r.scores else r.source for r in self.results]


def run_sets(
    case_sets: list[CaseSet], recaller: Recaller, params: GateParams, now: datetime, model: str = ""
) -> SetsResult:
    """Every set scored once at ``params``; then LOSO and the calibration on all of them."""
    from dataclasses import replace

    from memself.errors import InvalidInput
    from memself.recall.fitting import calibrate, loso, wording_of

    if any(c.fmt != "dev" for c in case_sets):
        raise InvalidInput("多组用例只支持 memself 的用例格式（带 memories 的文件）")
    results = [run_cases(c, recaller, params, now, model=model) for c in case_sets]
    scores = []
    seen: set[str] = set()
    for r in results:
        assert r.scores is not None
        name, n = r.scores.name, 2
        while name in seen:  # two files with one name in different folders
            name, n = f"{r.scores.name}-{n}", n + 1
        seen.add(name)
        r.scores = replace(r.scores, name=name)
        scores.append(r.scores)
    lexical = recaller.scoring.lexical
    general = recaller.scoring.general_question
    wording = wording_of(recaller.scoring)
    return SetsResult(
        model,
        params,
        dict(recaller.scoring.view_offset) if recaller.scoring.applies_when else {g: 0.0 for g in GROUPS},
        results,
        loso(scores, lexical, general, params.top_k, wording=wording),
        calibrate(scores, lexical, general, top_k=params.top_k, wording=wording),
    )


# ---------------------------------------------------------------------------------- rendering


def _pct(n: int, d: int) -> str:
    return f"{n}/{d}（{n / d:.0%}）" if d else "0/0"


def _line(c: dict[str, Counts]) -> str:
    r, p = c["rule"], c["project"]
    return (
        f"规则命中 {_pct(r.hits, r.cases)} 泄漏 {_pct(r.leaks, r.irrelevant)}；"
        f"项目事实命中 {_pct(p.hits, p.cases)} 泄漏 {_pct(p.leaks, p.irrelevant)}；"
        f"单条 {_pct(r.single_hits + p.single_hits, r.single_cases + p.single_cases)}"
    )


def _mean_line(m: dict[str, float]) -> str:
    return (
        f"规则命中 {m['ruleHit']:.1%} 泄漏 {m['ruleLeak']:.1%}；"
        f"项目事实命中 {m['projectHit']:.1%} 泄漏 {m['projectLeak']:.1%}；单条 {m['single']:.1%}"
    )


def _groups(values: dict[str, float]) -> str:
    return "，".join(f"{GROUP_SHORT_LABELS[g]} {values[g]:.4f}" for g in GROUPS)


def _counts_of(result: VerifyResult) -> dict[str, Counts]:
    from memself.recall.fitting import Counts

    return {
        g: Counts(
            result.groups[g].hits,
            result.groups[g].cases,
            result.groups[g].leaks,
            result.groups[g].irrelevant,
            result.groups[g].single_hits,
            result.groups[g].single_cases,
        )
        for g in GROUPS
    }


def means(res: SetsResult) -> dict[str, dict[str, float] | None]:
    from memself.recall.fitting import rates

    views = [f.views for f in res.folds if f.views is not None]
    return {
        "shipped": rates([_counts_of(r) for r in res.results]),
        "plain": rates([f.plain for f in res.folds]),
        "views": rates(views) if len(views) == len(res.folds) else None,
    }


def held_out_shapes(res: SetsResult) -> dict[str, Any]:
    """Per shape of prompt, held out: each fold's counts summed over the folds (without views,
    and with them when every set has views)."""
    from memself.recall.fitting import pooled_shapes

    views = [f.shapes_views for f in res.folds if f.shapes_views is not None]
    return {
        "plain": pooled_shapes([f.shapes_plain for f in res.folds]),
        "views": pooled_shapes(views) if len(views) == len(res.folds) else None,
    }


def render_sets_text(res: SetsResult) -> str:
    p = res.params
    lines = [
        f"召回验证：{len(res.results)} 组用例（模型 {res.model or '未知'}）",
        f"当前阈值：{_groups(p.floors)}；带适用场景的记忆另加 {_groups(res.view_offset)}",
        "",
        "各组在当前阈值下（阈值若在这些组上校准过，这里偏乐观）：",
    ]
    for name, r in zip(res.names, res.results, strict=True):
        lines.append(f"  {name}：{_line(_counts_of(r))}")
    lines += ["", "留一组校准（在其余各组上校准，只在留出的一组上计数）："]
    for f in res.folds:
        cal = f.calibration
        lines.append(
            f"  留出 {f.held}：阈值 {_groups(cal.floors)}；通用问题扣分 {_groups(cal.penalty)}"
            + (f"；适用场景偏移 {_groups(cal.view_offset)}" if f.views is not None else "")
        )
        lines.append(f"    不带适用场景：{_line(f.plain)}")
        if f.views is not None:
            lines.append(f"    带适用场景：{_line(f.views)}")
    m = means(res)
    lines.append("")
    lines.append(f"留一组平均（不带适用场景）：{_mean_line(m['plain'] or {})}")
    if m["views"] is not None:
        lines.append(f"留一组平均（带适用场景）：{_mean_line(m['views'])}")
    shapes = held_out_shapes(res)
    lines.append("")
    lines.append("按提问形态，留一组（各组留出时的计数相加），不带适用场景：")
    lines += shape_lines(shapes["plain"])
    if shapes["views"] is not None:
        lines.append("带适用场景：")
        lines += shape_lines(shapes["views"])
    cal = res.calibration
    lines.append("")
    lines.append(
        f"在全部 {len(res.results)} 组上校准：阈值 {_groups(cal.floors)}；通用问题扣分 {_groups(cal.penalty)}"
        + (f"；适用场景偏移 {_groups(cal.view_offset)}" if cal.views_floors is not None else "")
    )
    return "\n".join(lines)


def _counts_json(c: dict[str, Counts]) -> dict[str, Any]:
    out: dict[str, Any] = {
        g: {"hits": c[g].hits, "cases": c[g].cases, "leaks": c[g].leaks, "irrelevant": c[g].irrelevant}
        for g in GROUPS
    }
    out["single"] = {
        "hits": sum(c[g].single_hits for g in GROUPS),
        "cases": sum(c[g].single_cases for g in GROUPS),
    }
    return out


def _calibration_json(cal: Calibration) -> dict[str, Any]:
    return {
        "sets": cal.sets,
        "floors": cal.floors,
        "penalty": cal.penalty,
        "viewOffset": cal.view_offset if cal.views_floors is not None else None,
    }


def render_sets_json(res: SetsResult) -> dict[str, Any]:
    return {
        "model": res.model,
        "floors": res.params.floors,
        "viewOffset": res.view_offset,
        "sets": [{"name": n, **render_json(r)} for n, r in zip(res.names, res.results, strict=True)],
        "loso": {
            "folds": [
                {
                    "held": f.held,
                    "calibration": _calibration_json(f.calibration),
                    "plain": _counts_json(f.plain),
                    "views": _counts_json(f.views) if f.views is not None else None,
                }
                for f in res.folds
            ],
            "mean": means(res),
            "shapes": {k: shapes_json(v) if v is not None else None for k, v in held_out_shapes(res).items()},
        },
        "calibration": _calibration_json(res.calibration),
    }
