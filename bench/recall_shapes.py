"""Why prompts of one shape miss, held out: every signal of each missed prompt (docs/recall.md).

    .venv/bin/python bench/recall_shapes.py [--shape short|english|shorthand|all] [--views]
        [--cases eval/cases] [--applies-when eval/applies-when] [--set knob=value ...]

Scores the in-repo case sets once with the model's calibration knobs (``recall_calibrate.py``),
runs leave-one-set-out with the shipped procedure, and for each relevant prompt of the shape that
its fold missed prints: the set, the group of its best expected memory, that memory's dense score
(with views when ``--views``) and rank by dense score in its group, the group's top1 dense score,
the lexical overlap, the detector's probability (the fold's classifier, as an unseen team would
get it) and the penalty it costs, the fused score, and the fold's floor (plus the view offset).
A miss whose memory ranks first and whose fused score is under the floor was cut by the floor
after the penalty; a miss that ranks lower lost on the ranking. Ends with the counts per shape.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from recall_calibrate import knobs_of, recaller_for  # noqa: E402

from memself.cli.recall_run import case_files  # noqa: E402
from memself.model.catalog import OFFLINE_MODEL, resolve_model  # noqa: E402
from memself.recall.fitting import (  # noqa: E402
    GROUPS,
    loso,
    params_of,
    pooled_shapes,
    probabilities,
    thresholds,
    wording_of,
)
from memself.recall.gate import GateParams, default_floors  # noqa: E402
from memself.recall.scoring import extra_floors, fuse  # noqa: E402
from memself.verify.cases import load_applies_when, load_cases, with_applies_when  # noqa: E402
from memself.verify.run import run_cases  # noqa: E402

NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", default="short")
    ap.add_argument("--views", action="store_true", help="count memories with their appliesWhen views")
    ap.add_argument("--cases", type=Path, default=REPO / "eval" / "cases")
    ap.add_argument("--applies-when", type=Path, default=REPO / "eval" / "applies-when")
    ap.add_argument("--set", action="append", default=[], help="knob=value for this run")
    args = ap.parse_args()
    knobs = knobs_of(OFFLINE_MODEL)
    for item in args.set:
        key, _, value = item.partition("=")
        knobs[key] = float(value)
    recaller = recaller_for(OFFLINE_MODEL, knobs)
    params = GateParams(default_floors(resolve_model(OFFLINE_MODEL)), -1.0, 3)
    sets, prompts = [], []
    for path in case_files([args.cases]):
        cases = load_cases(path)
        if (args.applies_when / path.name).is_file():
            cases = with_applies_when(cases, load_applies_when(args.applies_when / path.name))
        result = run_cases(cases, recaller, params, NOW)
        assert result.scores is not None
        sets.append(result.scores)
        prompts.append([c.prompt for c in cases.relevant])
    lexical = recaller.scoring.lexical
    folds = loso(sets, lexical, recaller.scoring.general_question, wording=wording_of(recaller.scoring))
    print("| set | prompt | group | dense | rank | top1 | lexical | P(general) | penalty | fused | floor |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for s, fold, texts in zip(sets, folds, prompts, strict=True):
        p = params_of(fold.calibration, lexical)
        general = probabilities(s, p.classifier)[0]
        dense = s.pool.dense if args.views else s.pool.dense_text
        lex = s.pool.lexical if args.views else s.pool.lexical_text
        spared = s.pool.entity if s.pool.entity is not None else np.zeros_like(dense)
        fused = fuse(dense, lex, s.group[None, :], general[:, None], lexical, p.penalty, spared)
        extra = extra_floors(s.group, s.has_views & args.views, p.view_offset)
        counted = (fold.views if args.views else fold.plain) is not None
        shapes = s.shapes
        t = thresholds(s, p, args.views, probabilities(s, p.classifier))
        found = np.zeros(s.n_relevant, dtype=bool)
        for code, g in enumerate(GROUPS):
            rows = [i for i, want in enumerate(s.expect) if (s.group[want] == code).any()]
            if rows:
                found[rows] |= t.rel[g] >= p.floors[g]
        for i in range(s.n_relevant):
            if found[i] or not counted or (args.shape != "all" and args.shape not in shapes[i]):
                continue
            want = s.expect[i]
            j = int(want[np.argmax(dense[i, want])])
            code = int(s.group[j])
            cols = np.flatnonzero(s.group == code)
            rank = int((dense[i, cols] > dense[i, j]).sum())
            g = GROUPS[code]
            cost = p.penalty[g] * general[i] * (1.0 - spared[i, j])
            print(
                f"| {s.name} | {texts[i]} | {g} | {dense[i, j]:.3f} | {rank} | {dense[i, cols].max():.3f} | "
                f"{lexical.get(g, 0.0) * lex[i, j]:.3f} | {general[i]:.2f} | {cost:.3f} | "
                f"{fused[i, j]:.3f} | {p.floors[g] + extra[j]:.3f} |"
            )
    key = "shapes_views" if args.views else "shapes_plain"
    pooled = pooled_shapes([getattr(f, key) or {} for f in folds])
    print()
    for name, c in sorted(pooled.items()):
        leaks = ", ".join(f"{g} {c.leaks[g]}" for g in GROUPS)
        print(f"{name}: found {c.hits}/{c.cases}; unrelated {c.irrelevant}, leaking {leaks}")


if __name__ == "__main__":
    main()
