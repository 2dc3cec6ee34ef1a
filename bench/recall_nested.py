"""Whether a scoring knob earns its place: its value chosen without the set it is judged on.

    .venv/bin/python bench/recall_nested.py --knob lexical_project --grid 0,0.05,0.1,0.15,0.2
        [--cases eval/cases] [--applies-when eval/applies-when]

Leave-one-set-out (``recall_calibrate.py``) shows what the shipped procedure reaches on a set it
was not calibrated on, but the knobs themselves (a lexical weight, say) were picked by looking at
those same held-out figures. This runs the pick itself inside the loop: for each held-out set, every
value of the grid is scored by leave-one-set-out over the *other* sets only, the best value is taken,
the procedure calibrates on the other sets at that value, and the held-out set is counted. The mean
over held-out sets is what picking the knob this way is worth on a team nobody looked at.

The pick maximises rule, project and single-memory hits, without requests and with them, minus
twice any leak above the group's limit (``memself.recall.fitting``: 20 % / 5 % without, 15 % / 3 %
with). Ties go to the smaller value. Prints each fold's pick with the inner scores, the nested
means, and the plain leave-one-set-out means at every value for comparison.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from recall_calibrate import case_arguments, knobs_of, run  # noqa: E402

from memself.recall.calibration import RecallCalibration  # noqa: E402
from memself.recall.fitting import (  # noqa: E402
    LEAK_LIMIT,
    VIEW_LEAK_LIMIT,
    Fold,
    SetScores,
    Wording,
    calibrate,
    count_set,
    loso,
    params_of,
    rates,
    wording_of,
)
from memself.recall.scoring import ScoringSettings  # noqa: E402


def worth(plain: dict[str, float], views: dict[str, float] | None) -> float:
    total = 0.0
    for r, limits in ((plain, LEAK_LIMIT), (views, VIEW_LEAK_LIMIT)):
        if r is None:
            continue
        total += r["ruleHit"] + r["projectHit"] + r["single"]
        total -= 2 * max(0.0, r["ruleLeak"] - limits["rule"])
        total -= 2 * max(0.0, r["projectLeak"] - limits["project"])
    return total


def fold_worth(folds: list[Fold]) -> float:
    views = [f.views for f in folds if f.views is not None]
    return worth(rates([f.plain for f in folds]), rates(views) if views else None)


def line(r: dict[str, float]) -> str:
    return (
        f"rule {r['ruleHit']:.1%}/{r['ruleLeak']:.1%} project {r['projectHit']:.1%}/"
        f"{r['projectLeak']:.1%} single {r['single']:.1%}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    case_arguments(ap)
    ap.add_argument("--knob", required=True)
    ap.add_argument("--grid", required=True, help="comma-separated values")
    args = ap.parse_args()
    grid = [float(v) for v in args.grid.split(",")]
    base = knobs_of(args.model)
    scored: dict[float, list[SetScores]] = {}
    lexical: dict[float, dict[str, float]] = {}
    wording: dict[float, Wording] = {}
    top_k = 3
    for value in grid:
        knobs = {**base, args.knob: value}
        res = run(args.model, knobs, args.cases, args.applies_when)
        top_k = res.params.top_k
        scored[value] = [r.scores for r in res.results if r.scores is not None]
        lexical[value] = {g: knobs.get(f"lexical_{g}", 0.0) for g in ("rule", "project")}
        wording[value] = wording_of(
            ScoringSettings.from_calibration(RecallCalibration(args.model, {}, knobs))
        )
        folds = loso(scored[value], lexical[value], True, top_k, wording=wording[value])
        views = [f.views for f in folds if f.views is not None]
        print(f"{args.knob}={value:g} LOSO without: {line(rates([f.plain for f in folds]))}")
        if views:
            print(f"{args.knob}={value:g} LOSO with:    {line(rates(views))}")
    names = [s.name for s in scored[grid[0]]]
    plain, views = [], []
    for k, name in enumerate(names):
        inner = {}
        for v in grid:
            others = [s for s in scored[v] if s.name != name]
            inner[v] = fold_worth(loso(others, lexical[v], True, top_k, wording=wording[v]))
        pick = max(grid, key=lambda v: (round(inner[v], 6), -v))
        rest = [s for s in scored[pick] if s.name != name]
        cal = calibrate(rest, lexical[pick], True, top_k=top_k, wording=wording[pick])
        params = params_of(cal, lexical[pick], top_k)
        held = scored[pick][k]
        plain.append(count_set(held, params, False))
        if held.any_views:
            views.append(count_set(held, params, True))
        scores = " ".join(f"{v:g}:{inner[v]:.4f}" for v in grid)
        print(f"held out {name}: picked {args.knob}={pick:g} (inner {scores})")
    print(f"nested without: {line(rates(plain))}")
    if views:
        print(f"nested with:    {line(rates(views))}")


if __name__ == "__main__":
    main()
