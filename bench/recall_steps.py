"""What each step of the recall pipeline gains on labelled cases (the README's table).

    .venv/bin/python bench/recall_steps.py [--cases eval/cases/dev.json]

Runs `memself verify`'s machinery with the real offline model (multilingual-e5-small through
sentence-transformers) once per step, each step adding one change to the one before, and prints a
markdown table: per group the best line of the sweep (most hits with leaks within the target's
limit: project <= 5%, rule <= 20%), the hits and leaks there, and single-memory hits at those
lines. The first row also shows the original's floors (0.22 / 0.29) as they are. The steps end at
the calibration before the general-question detector and appliesWhen views; what those add, and
how they hold on sets they were not calibrated on, is ``bench/recall_calibrate.py`` and
``docs/recall.md``.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from memself.recall.background import (  # noqa: E402
    build_space,
    default_sentences_path,
    general_prompts_path,
    load_sentences,
)
from memself.recall.gate import GateParams  # noqa: E402
from memself.recall.scoring import Recaller, ScoringSettings  # noqa: E402
from memself.verify.cases import load_cases  # noqa: E402
from memself.verify.run import run_cases  # noqa: E402

EVERYDAY = REPO / "bench" / "data" / "everyday_sentences.json"


class Side:
    """The real encoder, cached, with memories encoded as passages or (symmetric) as prompts."""

    model_id = "bench:steps"  # outside the model table: encode_memories then asks encode_passages

    def __init__(self, inner, symmetric: bool, cache: dict) -> None:
        self.inner, self.symmetric, self.cache, self.dim = inner, symmetric, cache, inner.dim

    def _get(self, texts, query: bool) -> np.ndarray:
        missing = [t for t in texts if (query, t) not in self.cache]
        if missing:
            fn = self.inner.encode_queries if query else self.inner.encode_passages
            for t, v in zip(missing, fn(missing), strict=True):
                self.cache[(query, t)] = v
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        return np.stack([self.cache[(query, t)] for t in texts])

    def encode_queries(self, texts):
        return self._get(list(texts), True)

    def encode_passages(self, texts):
        return self._get(list(texts), self.symmetric)


STEPS = [
    # name, sentences, symmetric, dims, lexical rule weight (tau 10), sentence views
    ("original: everyday-sentence mean, passages", EVERYDAY, False, 0, 0.0, False),
    ("coding-request background (background_sentences.json)", None, False, 0, 0.0, False),
    ("+ memories encoded like prompts (symmetric e5)", None, True, 0, 0.0, False),
    ("+ general-prompt background (mean only)", "general", True, 0, 0.0, False),
    ("+ remove 8 principal directions", "general", True, 8, 0.0, False),
    ("+ lexical overlap for rules (w 0.5)", "general", True, 8, 0.5, False),
    ("+ sentence views (the calibration before the detector and views)", "general", True, 8, 0.5, True),
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default=str(REPO / "eval" / "cases" / "dev.json"))
    args = ap.parse_args()
    from memself.model.encoder import load_encoder

    inner = load_encoder("multilingual-e5-small", REPO / ".cache" / "models")
    cases = load_cases(Path(args.cases))
    now = datetime.now(timezone.utc)
    cache: dict = {}
    print("| step | rule: line, hits, leaks | project: line, hits, leaks | single | targets |")
    print("|---|---|---|---|---|")
    for name, sentences, symmetric, dims, lex, views in STEPS:
        enc = Side(inner, symmetric, cache)
        path = (
            general_prompts_path()
            if sentences == "general"
            else default_sentences_path()
            if sentences is None
            else sentences
        )
        space = build_space(enc.model_id, enc.encode_queries(load_sentences(path)), dims)
        scoring = ScoringSettings(
            space_dims=dims,
            lexical={"rule": lex, "project": 0.0},
            lexical_tau=10.0,
            sentence_views=views,
            symmetric=symmetric,
        )
        rec = Recaller(enc, space, scoring)
        rows = []
        if sentences == EVERYDAY:
            res = run_cases(cases, rec, GateParams({"rule": 0.22, "project": 0.29}), now)
            rows.append(("original floors 0.22 / 0.29", res, 0.22, 0.29))
        res = run_cases(cases, rec, GateParams({"rule": 0.0, "project": 0.0}), now)
        fr = res.best["rule"].floor if res.best["rule"] else 1.0
        fp = res.best["project"].floor if res.best["project"] else 1.0
        res = run_cases(cases, rec, GateParams({"rule": fr, "project": fp}), now)
        rows.append((name, res, fr, fp))
        for label, r, a, b in rows:
            g = r.groups
            met = sum(t.met for t in r.targets)
            print(
                f"| {label} | {a:.3f}: {g['rule'].hits}/{g['rule'].cases}, "
                f"{g['rule'].leaks}/{g['rule'].irrelevant} | {b:.3f}: "
                f"{g['project'].hits}/{g['project'].cases}, "
                f"{g['project'].leaks}/{g['project'].irrelevant} | "
                f"{r.single_hits}/{r.single_cases} | {met}/{len(r.targets)} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
