"""Calibrate a model's recall on the in-repo case sets, and write its calibration file.

    .venv/bin/python bench/recall_calibrate.py [--cases eval/cases] [--applies-when eval/applies-when]
        [--set space_dims=0 ...] [--write]

Scores every set once with the real model and the scoring knobs of the model's calibration file
(``memself/data/recall/<model>.json``; ``--set`` overrides a knob for this run), then runs the
shipped procedure (``memself.recall.fitting``): leave-one-set-out, printed per set and as a mean,
and the calibration on all the sets. ``--write`` stores that calibration (floors, view offset,
general-question classifier and penalties) in the file, keeping its knobs (overrides included).
``memself verify --cases eval/cases --applies-when eval/applies-when`` then reproduces the
printed figures from the file.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from memself.cli.recall_run import case_files  # noqa: E402
from memself.model.catalog import OFFLINE_MODEL  # noqa: E402
from memself.model.encoder import load_encoder  # noqa: E402
from memself.recall import fitting as cal_mod  # noqa: E402
from memself.recall.background import load_space  # noqa: E402
from memself.recall.calibration import FORMAT, VERSION, calibration_dir, file_name, load_calibration  # noqa: E402
from memself.recall.gate import GateParams, default_floors  # noqa: E402
from memself.recall.scoring import Recaller, ScoringSettings  # noqa: E402
from memself.verify.cases import load_applies_when, load_cases, with_applies_when  # noqa: E402
from memself.verify.sets import SetsResult, means, render_sets_text, run_sets  # noqa: E402

NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)


def knobs_of(model: str) -> dict[str, float]:
    cal = load_calibration(model)
    return dict(cal.scoring) if cal is not None else {}


def recaller_for(model: str, knobs: dict[str, float]) -> Recaller:
    from memself.recall.calibration import RecallCalibration, load_calibration

    current = load_calibration(model)
    encoder = load_encoder(model)
    general = current.general if current else None
    width = encoder.dim + (2 if knobs.get("general_shape") else 0)  # shape.detector_features
    if general is not None and len(general.weights) != width + len(general.words):
        general = None  # the file's detector reads other features; this run calibrates a new one
    base = RecallCalibration(
        model,
        current.floors if current else {"rule": 0.0, "project": 0.0},
        knobs,
        current.view_offset if current else {"rule": 0.0, "project": 0.0},
        general,
    )
    scoring = ScoringSettings.from_calibration(base)
    space = load_space(encoder, scoring.space_dims, scoring.general_space)
    return Recaller(encoder, space, replace(scoring))


def run(model: str, knobs: dict[str, float], cases: Path, applies_when: Path | None) -> SetsResult:
    sets = []
    for path in case_files([cases]):
        c = load_cases(path)
        if applies_when is not None and (applies_when / path.name).is_file():
            c = with_applies_when(c, load_applies_when(applies_when / path.name))
        sets.append(c)
    recaller = recaller_for(model, knobs)
    from memself.model.catalog import resolve_model

    params = GateParams(default_floors(resolve_model(model)), -1.0, 3)
    return run_sets(sets, recaller, params, NOW, model)


def calibration_file(model: str, knobs: dict[str, float], res: SetsResult) -> dict[str, object]:
    cal = res.calibration
    held = means(res)
    out: dict[str, object] = {
        "format": FORMAT,
        "version": VERSION,
        "model": model,
        "floors": {g: round(v, 5) for g, v in cal.floors.items()},
        "scoring": knobs,
        "view_offset": {g: round(v, 5) for g, v in cal.view_offset.items()},
    }
    if cal.classifier is not None:
        out["general_question"] = {
            "penalty": cal.penalty,
            "bias": round(float(cal.classifier.bias), 6),
            "weights": [round(float(w), 6) for w in cal.classifier.weights],
        }
        if cal.classifier.words:
            # Their scale is the knob ``general_words``, already in ``scoring``.
            out["general_question"]["words"] = list(cal.classifier.words)  # type: ignore[index]
    # What the procedure reaches on sets it was not fitted on: what `views status` and `doctor`
    # quote for memories without and with requests.
    out["held_out"] = {
        condition: {k: round(v, 4) for k, v in rates.items()}
        for condition, rates in (("without", held["plain"]), ("with", held["views"]))
        if rates
    }
    out["calibrated_on"] = {
        "sets": cal.sets,
        "procedure": "memself.recall.fitting.calibrate",
        "leak_limit": cal_mod.LEAK_LIMIT,
        "view_leak_limit": cal_mod.VIEW_LEAK_LIMIT,
        "penalty_steps": list(cal_mod.PENALTY_STEPS),
        "l2": cal_mod.L2,
    }
    return out


def case_arguments(ap: argparse.ArgumentParser) -> None:
    """The options every recall bench takes: the model, the case sets and their requests."""
    ap.add_argument("--model", default=OFFLINE_MODEL)
    ap.add_argument("--cases", type=Path, default=REPO / "eval" / "cases")
    ap.add_argument("--applies-when", type=Path, default=REPO / "eval" / "applies-when")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    case_arguments(ap)
    ap.add_argument("--no-applies-when", action="store_true")
    ap.add_argument("--set", action="append", default=[], help="knob=value for this run")
    ap.add_argument("--write", action="store_true", help="write the calibration file")
    ap.add_argument("--json", type=Path, default=None, help="also write the verify JSON here")
    args = ap.parse_args()
    knobs = knobs_of(args.model)
    for item in args.set:
        key, _, value = item.partition("=")
        knobs[key] = float(value)
    started = time.time()
    res = run(args.model, knobs, args.cases, None if args.no_applies_when else args.applies_when)
    print(f"knobs: {json.dumps(knobs, sort_keys=True)}")
    print(render_sets_text(res))
    m = means(res)
    for k in ("plain", "views"):
        v = m[k]
        if v:
            print(
                f"LOSO {k}: rule {v['ruleHit']:.1%}/{v['ruleLeak']:.1%} project "
                f"{v['projectHit']:.1%}/{v['projectLeak']:.1%} single {v['single']:.1%}"
            )
    print(f"({time.time() - started:.0f} s)")
    if args.json:
        from memself.verify.sets import render_sets_json

        args.json.write_text(
            json.dumps(render_sets_json(res), ensure_ascii=False, indent=1), encoding="utf-8"
        )
    if args.write:
        path = calibration_dir() / file_name(args.model)
        path.write_text(
            json.dumps(calibration_file(args.model, knobs, res), ensure_ascii=False, indent=1) + "\n",
            encoding="utf-8",
        )
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
