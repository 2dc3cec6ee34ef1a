"""Redaction on the corpus kept in the repo: secrets hidden and look-alikes touched.

    .venv/bin/python bench/redaction_corpus.py [--set base|fresh] [--corpus PATH]

Prints, per set and in total, how many secret phrasings had every secret removed by
``memself.textfilter.redact`` and how many look-alikes came back changed, the mean time of one
``redact`` call over the corpus, then lists each failure with the redacted text.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from memself.textfilter import redact  # noqa: E402

DEFAULT_CORPUS = REPO / "tests" / "adversarial" / "data" / "redaction_corpus.json"


def _pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.1f} %" if whole else "-"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--set", dest="subset", default="", help="only entries of this set")
    args = parser.parse_args(argv)
    corpus = json.loads(args.corpus.read_text(encoding="utf-8"))
    secrets = [e for e in corpus["secrets"] if not args.subset or e["set"] == args.subset]
    lookalikes = [e for e in corpus["lookalikes"] if not args.subset or e["set"] == args.subset]

    leaks = []
    for entry in secrets:
        out = redact(entry["text"])
        left = [s for s in entry["secrets"] if s in out]
        if left:
            leaks.append((entry, out, left))
    touched = []
    for entry in lookalikes:
        out = redact(entry["text"])
        if out != entry["text"]:
            touched.append((entry, out))

    sets = sorted({e["set"] for e in secrets + lookalikes})
    for name in sets:
        s_total = sum(1 for e in secrets if e["set"] == name)
        s_leak = sum(1 for e, _, _ in leaks if e["set"] == name)
        l_total = sum(1 for e in lookalikes if e["set"] == name)
        l_touch = sum(1 for e, _ in touched if e["set"] == name)
        print(
            f"[{name}] secrets redacted {s_total - s_leak}/{s_total} ({_pct(s_total - s_leak, s_total)}), "
            f"look-alikes touched {l_touch}/{l_total} ({_pct(l_touch, l_total)})"
        )
    redacted = len(secrets) - len(leaks)
    print(
        f"[all] secrets redacted {redacted}/{len(secrets)} ({_pct(redacted, len(secrets))}), "
        f"look-alikes touched {len(touched)}/{len(lookalikes)} ({_pct(len(touched), len(lookalikes))})"
    )
    texts = [e["text"] for e in secrets + lookalikes]
    rounds = 20
    started = time.perf_counter()
    for _ in range(rounds):
        for text in texts:
            redact(text)
    per_call = (time.perf_counter() - started) / (rounds * len(texts)) if texts else 0.0
    print(f"redact: {per_call * 1e6:.0f} us per call (mean over {len(texts)} entries x {rounds})")
    if leaks:
        print("\nsecrets that survived:")
        for entry, out, left in leaks:
            print(f"  {entry['id']} [{entry['set']}]: {out!r}  (left: {', '.join(left)})")
    if touched:
        print("\nlook-alikes changed:")
        for entry, out in touched:
            print(f"  {entry['id']} [{entry['set']}]: {out!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
