"""Held-out trade-off between hits and leaks, per group (the frontier in docs/recall.md).

    .venv/bin/python bench/recall_frontier.py [--cases eval/cases] [--applies-when eval/applies-when]
        [--set knob=value ...]

Scores the in-repo case sets once with the shipped model and calibration knobs, then for each leak
limit of one group (the other keeps its own; the views' limit of that group moves with it)
runs leave-one-set-out with the shipped procedure
(``memself.recall.fitting.loso``) and prints, per group, the mean held-out hit and leak rates
and single-memory hits: without appliesWhen views and with them. The row at the shipped limit
(rule 20%, project 5%) is the shipped configuration without views; with views it shows the views
fitted at that same limit, not the shipped view limits. ``--set`` overrides a scoring knob of the
model's calibration file for this run (as in ``recall_calibrate.py``), e.g. to draw the frontier
of the plain cosine: ``--set general_question=0 --set applies_when=0 --set space_dims=8
--set sentence_views=1``.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from recall_calibrate import case_arguments, knobs_of, recaller_for  # noqa: E402

from memself.cli.recall_run import case_files  # noqa: E402
from memself.model.catalog import resolve_model  # noqa: E402
from memself.recall.fitting import LEAK_LIMIT, VIEW_LEAK_LIMIT, loso, rates, wording_of  # noqa: E402
from memself.recall.gate import GateParams, default_floors  # noqa: E402
from memself.verify.cases import load_applies_when, load_cases, with_applies_when  # noqa: E402
from memself.verify.run import run_cases  # noqa: E402

LIMITS = (0.0, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.25, 0.3)
NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    case_arguments(ap)
    ap.add_argument("--set", action="append", default=[], help="knob=value for this run")
    args = ap.parse_args()
    started = time.time()
    knobs = knobs_of(args.model)
    for item in args.set:
        key, _, value = item.partition("=")
        knobs[key] = float(value)
    recaller = recaller_for(args.model, knobs)
    params = GateParams(default_floors(resolve_model(args.model)), -1.0, 3)
    scores = []
    for path in case_files([args.cases]):
        cases = load_cases(path)
        if (args.applies_when / path.name).is_file():
            cases = with_applies_when(cases, load_applies_when(args.applies_when / path.name))
        result = run_cases(cases, recaller, params, NOW, model=args.model)
        assert result.scores is not None
        scores.append(result.scores)
    lexical = recaller.scoring.lexical
    general = recaller.scoring.general_question
    names = {"rule": "rules", "project": "project facts"}
    for group in ("rule", "project"):
        print(
            f"\n{names[group]}: leak limit at calibration -> held-out mean (LOSO over {len(scores)} sets)\n"
        )
        print(
            "| limit | hit, no views | leak, no views | single, no views"
            " | hit, views | leak, views | single, views |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|")
        for limit in LIMITS:
            limits = {**LEAK_LIMIT, group: limit}
            view_limits = {**VIEW_LEAK_LIMIT, group: limit}
            folds = loso(
                scores, lexical, general, params.top_k, limits, view_limits, wording_of(recaller.scoring)
            )
            plain = rates([f.plain for f in folds])
            with_views = [f.views for f in folds if f.views is not None]
            views = rates(with_views) if with_views else None
            mark = " (shipped)" if abs(limit - LEAK_LIMIT[group]) < 1e-9 else ""
            cells = [f"{plain[group + 'Hit']:.1%}", f"{plain[group + 'Leak']:.1%}", f"{plain['single']:.1%}"]
            if views is None:  # the model does not score views: nothing to show
                cells += ["-", "-", "-"]
            else:
                cells += [
                    f"{views[group + 'Hit']:.1%}",
                    f"{views[group + 'Leak']:.1%}",
                    f"{views['single']:.1%}",
                ]
            print(f"| {limit:.1%}{mark} | " + " | ".join(cells) + " |")
    print(f"\n({time.time() - started:.0f} s)")


if __name__ == "__main__":
    main()
