"""Redaction on the corpus kept in the repo: secrets hidden and look-alikes touched.

    .venv/bin/python bench/redaction_corpus.py [--set base|fresh] [--corpus PATH] [--fresh-runs N]

Prints, per set and in total, how many secret phrasings had every secret removed by
``memself.text.redact.redact`` and how many look-alikes came back changed, the mean time of one
``redact`` call over the corpus, the first ``prepare_for_judge`` of a fresh process (what a prompt
hook pays: the rules it needs compile then) for a plain prompt and for one with a password, then
lists each failure with the redacted text. ``--corpus tests/adversarial/data/redaction_heldout.json``
measures the held-out set.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from memself.text.redact import redact  # noqa: E402

DEFAULT_CORPUS = REPO / "tests" / "adversarial" / "data" / "redaction_corpus.json"
FIRST_CALL_PROMPTS = {
    "plain prompt": "记住：以后回答都用中文，提交信息用英文写",
    "prompt with a password": "记住：测试服务器的密码就是 Hunter2024!，登录后先切到 ops 用户",
}
_FIRST_CALL = (
    "import sys, time; sys.path.insert(0, sys.argv[1]); import memself.text.redact as tf; "
    "t = time.perf_counter(); tf.prepare_for_judge(sys.argv[2]); print(time.perf_counter() - t)"
)


def first_call_ms(prompt: str, runs: int) -> float:
    """Median time of the first ``prepare_for_judge`` in a fresh process, after the import."""
    times = [
        float(subprocess.check_output([sys.executable, "-c", _FIRST_CALL, str(REPO), prompt], text=True))
        for _ in range(runs)
    ]
    return statistics.median(times) * 1e3


def _pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.1f} %" if whole else "-"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--set", dest="subset", default="", help="only entries of this set")
    parser.add_argument("--fresh-runs", type=int, default=15, help="fresh processes per first-call row")
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
    for label, prompt in FIRST_CALL_PROMPTS.items():
        ms = first_call_ms(prompt, args.fresh_runs)
        print(f"first prepare_for_judge in a new process, {label}: {ms:.1f} ms (median of {args.fresh_runs})")
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
