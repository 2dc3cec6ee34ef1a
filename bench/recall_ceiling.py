"""What any gate could reach on the model's ranking: the hit rate of a perfect gate.

    .venv/bin/python bench/recall_ceiling.py [--cases eval/cases] [--applies-when eval/applies-when]
        [--top-k 3] [--relative 0.6]

The gate (floors, the general-question penalty) can only remove memories from a prompt's top k.
So a relevant prompt whose needed memory is not among its group's top k by score (dense plus the
lexical overlap, no penalty), or falls under the relative line (``--relative`` x top1), is lost
whatever the floors and the detector do. This prints, per group, the share of relevant prompts
that are not lost that way, as the mean over the sets (as ``memself verify`` averages), without
requests and with them: the ceiling of every hit rate that a change of the gate alone can buy.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

import numpy as np  # noqa: E402
from recall_calibrate import case_arguments, knobs_of, run  # noqa: E402

from memself.recall.fitting import SetScores  # noqa: E402
from memself.recall.scoring import fuse  # noqa: E402
from memself.store.records import GROUPS  # noqa: E402


def ceiling(
    s: SetScores, lexical: dict[str, float], views: bool, top_k: int, relative: float
) -> dict[str, float]:
    block = s.pool
    dense = block.dense if views else block.dense_text
    lex = block.lexical if views else block.lexical_text
    no_penalty = {g: 0.0 for g in GROUPS}
    fused = fuse(dense, lex, s.group[None, :], np.zeros((len(block), 1)), lexical, no_penalty)
    out = {}
    for code, g in enumerate(GROUPS):
        cols = np.flatnonzero(s.group == code)
        hits = cases = 0
        for i, want in enumerate(s.expect):
            mine = want[s.group[want] == code]
            if not len(mine):
                continue
            cases += 1
            order = cols[np.argsort(-fused[i, cols], kind="stable")[:top_k]]
            kept = [j for j in order if fused[i, j] >= relative * fused[i, order[0]]]
            hits += bool(np.isin(kept, mine).any())
        out[g] = hits / cases if cases else 0.0
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    case_arguments(ap)
    ap.add_argument("--top-k", type=int, default=3)
    ap.add_argument("--relative", type=float, default=0.6)
    args = ap.parse_args()
    knobs = knobs_of(args.model)
    lexical = {g: knobs.get(f"lexical_{g}", 0.0) for g in GROUPS}
    res = run(args.model, knobs, args.cases, args.applies_when)
    sets = [r.scores for r in res.results if r.scores is not None]
    for views in (False, True):
        per = [ceiling(s, lexical, views, args.top_k, args.relative) for s in sets]
        cells = " ".join(f"{g} {np.mean([p[g] for p in per]):.1%}" for g in GROUPS)
        print(f"{'with requests' if views else 'without requests'}: ceiling {cells}")


if __name__ == "__main__":
    main()
