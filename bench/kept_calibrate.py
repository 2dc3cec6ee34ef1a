"""Calibrate and measure the fact-used decision on labelled pairs (fact, answer, used yes/no).

    MEMSELF_MODEL_CACHE=... .venv/bin/python bench/kept_calibrate.py [--pairs FILE ...] [--line X]

For each pair: whether the fact shares an identifier with the answer, and the highest cosine
between the fact and the answer's sentences (the offline model, as the engine encodes them).
Prints, per similarity line, precision and recall of "used" for the similarity alone and for the
shipped rule (identifier overlap, or similarity at or above the line), then the figures at
``--line`` (default: the shipped ``SIMILARITY_LINE``) per file and per style.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from memself.kept.similarity import best_cosines  # noqa: E402
from memself.kept.used import SIMILARITY_LINE, sentences, shares_identifier  # noqa: E402
from memself.model.catalog import OFFLINE_MODEL  # noqa: E402
from memself.model.encoder import load_encoder  # noqa: E402
from memself.paths import model_cache_dir  # noqa: E402
from memself.recall.scoring import load_recaller  # noqa: E402

DEFAULT_PAIRS = [REPO / "eval" / "kept" / "used_calibration.json"]


def score(pairs: list[dict], encoder: object, space: object) -> list[tuple[bool, bool, float, str]]:
    """(labelled used, identifier overlap, best cosine, style) per pair."""
    out = []
    for pair in pairs:
        parts = sentences(pair["answer"])
        best = best_cosines(encoder, [pair["fact"]], parts, space)[0]  # type: ignore[arg-type]
        out.append((bool(pair["used"]), shares_identifier(pair["fact"], pair["answer"]), best, pair["style"]))
    return out


def pr(rows: list[tuple[bool, bool]]) -> tuple[float, float, int, int, int]:
    tp = sum(1 for label, said in rows if label and said)
    fp = sum(1 for label, said in rows if not label and said)
    fn = sum(1 for label, said in rows if label and not said)
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    return precision, recall, tp, fp, fn


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", nargs="*", type=Path, default=DEFAULT_PAIRS)
    parser.add_argument("--line", type=float, default=SIMILARITY_LINE)
    parser.add_argument("--sweep", action="store_true", help="print every line from 0.20 to 0.76")
    args = parser.parse_args()
    cache = Path(os.environ.get("MEMSELF_MODEL_CACHE") or model_cache_dir())
    encoder = load_encoder(OFFLINE_MODEL, cache)
    space = load_recaller(encoder, OFFLINE_MODEL).space
    for path in args.pairs:
        pairs = json.loads(path.read_text(encoding="utf-8"))
        scored = score(pairs, encoder, space)
        print(f"== {path.name}: {len(pairs)} pairs, {sum(1 for s in scored if s[0])} used")
        if args.sweep:
            for step in range(20, 80, 4):
                line = step / 100
                sim = pr([(u, b >= line) for u, _, b, _ in scored])
                both = pr([(u, i or b >= line) for u, i, b, _ in scored])
                print(
                    f"  line {line:.2f}  similarity alone P {sim[0]:.2f} R {sim[1]:.2f}"
                    f"  | with identifiers P {both[0]:.2f} R {both[1]:.2f}"
                    f" (tp {both[2]} fp {both[3]} fn {both[4]})"
                )
        ident = pr([(u, i) for u, i, _, _ in scored])
        both = pr([(u, i or b >= args.line) for u, i, b, _ in scored])
        print(f"  identifiers alone: P {ident[0]:.2f} R {ident[1]:.2f}")
        print(
            f"  shipped rule at {args.line:.2f}: P {both[0]:.2f} R {both[1]:.2f}"
            f" (tp {both[2]} fp {both[3]} fn {both[4]})"
        )
        for style in sorted({s for *_, s in scored}):
            rows = [(u, i or b >= args.line) for u, i, b, s in scored if s == style]
            right = sum(1 for u, said in rows if u == said)
            print(f"    {style:14s} n {len(rows):2d}  decided right {right}")
        for u, i, b, s in scored:
            if (i or b >= args.line) != u:
                print(f"    miss: {s} used={u} ident={i} best={b:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
