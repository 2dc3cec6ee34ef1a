"""Benchmark: the lexical signal's start-up (segmenter + IDF table) and its tokens, side by side.

    .venv/bin/python bench/bench_lexical.py [--runs 7] [--skip-times] [--skip-equal]
        [--cases FILE ...] [--fuzz 20000] [--parallel] [--tokenizer tokenizer.json] [--onnx model.onnx]

Start-up: each candidate runs in a fresh process (``--child NAME``), from the first line (before
any import) to the first tokenised text; medians over ``--runs`` processes, candidates interleaved
so load drifts hit them alike. RSS is VmRSS after that first text, peak is VmHWM.

Candidates (the optional ones only when installed):
- jieba: what memself did before: ``import jieba, jieba.analyse`` (which parses idf.txt itself),
  memself parses idf.txt into a dict, jieba builds its prefix dictionary on the first cut;
- rjieba + idf.txt parsed: the jieba-rs binding, the IDF table parsed into a dict as before;
- rjieba + marshal dict: the IDF dict from a marshal file (the fastest dict form; not shipped:
  marshal is not meant for files another program may have written);
- rjieba + IdfTable cache: ``memself.recall.lexical.warm_up()`` with its cache file in place;
- the same on a cold cache (first run after install: parses idf.txt and writes the cache);
- jieba_fast / jieba_fast_dat (with jieba's dict.txt) + idf.txt parsed.

Equality: ``memself.recall.lexical.tokens`` against the jieba reference (same code, jieba's
``lcut_for_search`` on whole runs and the parsed dict) on every string of the given JSON files
(the repo's background sentences and general prompts by default; ``--cases`` adds case files,
read in place), plus ``--fuzz`` random runs of dictionary words and rare characters.

``--parallel`` times a model-like load (tokenizers' ``Tokenizer.from_file`` and, with ``--onnx``,
an onnxruntime session) with ``lexical.warm_up()`` before it, and in a thread beside it.
"""

from __future__ import annotations

import time

_T0 = time.perf_counter()  # a child's clock starts before any import below

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TEXT = "帮我看一下运单详情页面为什么加载这么慢，WaybillDetailPage 里调了 /api/v2/waybill 三次"
ENV_MARSHAL = "BENCH_LEXICAL_MARSHAL"  # where the parent put the marshal'd dict


def _status_mb(field: str) -> float:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _rjieba_cut():
    import rjieba

    from memself.recall.lexical import _JIEBA_HAN

    cut = rjieba.cut_for_search
    return lambda run: [w for p in _JIEBA_HAN.findall(run) for w in cut(p, True)]


def _parsed_idf():
    from memself.recall.lexical import UNKNOWN_IDF, idf_source_path, parse_idf

    table = parse_idf(idf_source_path())
    return lambda word: table.get(word, UNKNOWN_IDF)


def _jieba_ref():
    import jieba
    import jieba.analyse  # memself imported it: it parses idf.txt a second time

    jieba.setLogLevel(60)
    return jieba.lcut_for_search


def child(name: str) -> dict:
    from memself.recall import lexical

    if name == "baseline":
        out: dict = {}
    elif name == "rjieba-only":  # the segmenter alone: the floor of every rjieba row
        out = dict.fromkeys(_rjieba_cut()(TEXT), 0.0)
    elif name == "jieba":
        out = lexical.tokens_with(TEXT, _jieba_ref(), _parsed_idf())
    elif name == "rjieba+parse":
        out = lexical.tokens_with(TEXT, _rjieba_cut(), _parsed_idf())
    elif name == "rjieba+marshal":
        import marshal

        cut = _rjieba_cut()
        with open(os.environ[ENV_MARSHAL], "rb") as fh:
            table = marshal.loads(fh.read())
        out = lexical.tokens_with(TEXT, cut, lambda w: table.get(w, lexical.UNKNOWN_IDF))
    elif name in ("rjieba+cache", "rjieba+cold-cache"):
        lexical.warm_up()
        out = lexical.tokens(TEXT)
    elif name == "jieba_fast+parse":
        import jieba_fast

        jieba_fast.setLogLevel(60)
        out = lexical.tokens_with(TEXT, jieba_fast.lcut_for_search, _parsed_idf())
    elif name == "jieba_fast_dat+parse":
        import jieba_fast_dat

        jieba_fast_dat.set_dictionary(str(lexical.idf_source_path().parent.parent / "dict.txt"))
        out = lexical.tokens_with(TEXT, jieba_fast_dat.lcut_for_search, _parsed_idf())
    else:
        raise SystemExit(f"unknown candidate {name}")
    return {
        "first_s": time.perf_counter() - _T0,
        "rss_mb": _status_mb("VmRSS"),
        "hwm_mb": _status_mb("VmHWM"),
        "tokens": len(out),
    }


def _installed(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def _run_child(name: str, env: dict[str, str]) -> dict:
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, __file__, "--child", name], env=env, capture_output=True, text=True, check=True
    )
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["wall_s"] = time.perf_counter() - start
    return result


def bench_times(runs: int) -> None:
    import marshal

    from memself.recall.lexical import idf_source_path, parse_idf

    names = [
        "baseline",
        "rjieba-only",
        "jieba",
        "rjieba+parse",
        "rjieba+marshal",
        "rjieba+cache",
        "rjieba+cold-cache",
    ]
    names += [
        n
        for n, m in (("jieba_fast+parse", "jieba_fast"), ("jieba_fast_dat+parse", "jieba_fast_dat"))
        if _installed(m)
    ]
    with tempfile.TemporaryDirectory(prefix="bench-lexical-") as tmp:
        marshal_path = Path(tmp) / "idf.marshal"
        marshal_path.write_bytes(marshal.dumps(parse_idf(idf_source_path())))
        warm_cache = Path(tmp) / "warm"
        base_env = {**os.environ, ENV_MARSHAL: str(marshal_path), "MEMSELF_MODEL_CACHE": str(warm_cache)}
        for name in names:  # one unmeasured run each: page cache, the warm cache, jieba_fast_dat's cache
            _run_child(name, base_env)
        results: dict[str, list[dict]] = {n: [] for n in names}
        for i in range(runs):
            for name in names:
                env = base_env
                if name == "rjieba+cold-cache":
                    env = {**base_env, "MEMSELF_MODEL_CACHE": str(Path(tmp) / f"cold{i}")}
                results[name].append(_run_child(name, env))
    print(
        f"\nStart-up to the first tokenised text, median of {runs} fresh processes "
        f"(load average {os.getloadavg()[0]:.2f}):\n"
    )
    print("| candidate | first tokens (in process) | process wall | RSS after | peak RSS |")
    print("|---|---|---|---|---|")
    for name in names:
        rs = results[name]

        def med(key: str, rs: list[dict] = rs) -> float:
            return statistics.median(r[key] for r in rs)

        print(
            f"| {name} | {med('first_s') * 1000:.0f} ms | {med('wall_s') * 1000:.0f} ms "
            f"| {med('rss_mb'):.0f} MB | {med('hwm_mb'):.0f} MB |"
        )


def _strings(node: object, out: list[str], key: str | None = None) -> None:
    if isinstance(node, str):
        if key not in ("key", "group", "expect", "near", "name"):
            out.append(node)
    elif isinstance(node, list):
        for item in node:
            _strings(item, out, key)
    elif isinstance(node, dict):
        for k, v in node.items():
            _strings(v, out, k)


def _fuzz_texts(count: int, seed: int = 7) -> list[str]:
    from memself.recall.lexical import idf_source_path

    idf_words = [line.split(" ", 1)[0] for line in idf_source_path().read_text("utf-8").splitlines()]
    dict_words = [
        line.split(" ", 1)[0]
        for line in (idf_source_path().parent.parent / "dict.txt").read_text("utf-8").splitlines()
    ]
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(1, 12)):
            roll = rng.random()
            if roll < 0.35:
                parts.append(rng.choice(idf_words))
            elif roll < 0.7:
                parts.append(rng.choice(dict_words))
            elif roll < 0.8:  # the edge of jieba's Chinese range (U+9FD5) and past it
                parts.append(chr(rng.randint(0x9FD0, 0x9FFF)))
            else:
                parts.append("".join(chr(rng.randint(0x4E00, 0x9FFF)) for _ in range(rng.randint(1, 4))))
        out.append("".join(parts) + rng.choice(["", " config.go ", "，", " WaybillRepo"]))
    return out


def bench_equal(case_files: list[Path], fuzz: int) -> None:
    from memself.recall import lexical

    files = [
        REPO / "background_sentences.json",
        REPO / "memself" / "data" / "general_prompts.json",
        *case_files,
    ]
    texts: list[str] = []
    for path in files:
        _strings(json.loads(path.read_text("utf-8")), texts)
    texts = list(dict.fromkeys(texts))
    ref_cut, ref_idf = _jieba_ref(), _parsed_idf()
    for label, corpus in (("corpus", texts), ("fuzz", _fuzz_texts(fuzz) if fuzz else [])):
        if not corpus:
            continue
        same, diffs = 0, []
        for text in corpus:
            ref = lexical.tokens_with(text, ref_cut, ref_idf)
            new = lexical.tokens(text)
            if ref == new:
                same += 1
            else:
                diffs.append(
                    (
                        text,
                        sorted(set(ref) - set(new)),
                        sorted(set(new) - set(ref)),
                        sorted(t for t in set(ref) & set(new) if ref[t] != new[t]),
                    )
                )
        print(
            f"\nToken dicts, {label} ({len(files) if label == 'corpus' else 'random'} sources): "
            f"{same}/{len(corpus)} identical ({100 * same / len(corpus):.2f} %)"
        )
        for text, only_ref, only_new, weight in diffs[:20]:
            print(f"  {text[:60]!r}: only jieba {only_ref}, only new {only_new}, weight differs {weight}")


def bench_throughput(rounds: int = 20) -> None:
    """Steady-state cost of ``tokens`` per text (what an index build over many memories pays)."""
    from memself.recall import lexical

    texts: list[str] = []
    for path in (REPO / "background_sentences.json", REPO / "memself" / "data" / "general_prompts.json"):
        _strings(json.loads(path.read_text("utf-8")), texts)
    lexical.warm_up()
    table = lexical.load_idf_table()[0]
    parsed = lexical.parse_idf(lexical.idf_source_path())
    rows = [
        ("jieba + dict", _jieba_ref(), lambda w: parsed.get(w, lexical.UNKNOWN_IDF)),
        ("rjieba + dict", _rjieba_cut(), lambda w: parsed.get(w, lexical.UNKNOWN_IDF)),
        ("rjieba + IdfTable, no memo", _rjieba_cut(), table.get),
        ("rjieba + IdfTable + memo (tokens())", None, None),
    ]
    print(f"\nSteady-state tokens() per text, {len(texts)} texts x {rounds} rounds:\n")
    print("| path | per text |")
    print("|---|---|")
    for label, cut, idf_of in rows:
        start = time.perf_counter()
        for _ in range(rounds):
            for text in texts:
                if cut is None:
                    lexical.tokens(text)
                else:
                    lexical.tokens_with(text, cut, idf_of)
        print(f"| {label} | {(time.perf_counter() - start) / rounds / len(texts) * 1e6:.0f} µs |")


def _model_load(tokenizer: Path, onnx: Path | None) -> None:
    from tokenizers import Tokenizer

    Tokenizer.from_file(str(tokenizer))
    if onnx is not None:
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 2
        onnxruntime.InferenceSession(str(onnx), options, providers=["CPUExecutionProvider"])


def child_parallel(mode: str, tokenizer: Path, onnx: Path | None) -> dict:
    import threading

    from memself.recall import lexical

    if mode == "model-only":
        _model_load(tokenizer, onnx)
    elif mode == "sequential":
        _model_load(tokenizer, onnx)
        lexical.warm_up()
    else:
        thread = threading.Thread(target=lexical.warm_up)
        thread.start()
        _model_load(tokenizer, onnx)
        thread.join()
    return {
        "first_s": time.perf_counter() - _T0,
        "rss_mb": _status_mb("VmRSS"),
        "hwm_mb": _status_mb("VmHWM"),
    }


def bench_parallel(runs: int, tokenizer: Path, onnx: Path | None) -> None:
    modes = ["model-only", "sequential", "parallel"]
    extra = ["--tokenizer", str(tokenizer)] + (["--onnx", str(onnx)] if onnx else [])
    results: dict[str, list[float]] = {m: [] for m in modes}
    for i in range(runs + 1):
        for mode in modes:
            proc = subprocess.run(
                [sys.executable, __file__, "--child-parallel", mode, *extra],
                capture_output=True,
                text=True,
                check=True,
            )
            if i:  # the first round warms the page cache
                results[mode].append(json.loads(proc.stdout.strip().splitlines()[-1])["first_s"])
    what = "tokenizer" + (" + ONNX session" if onnx else "")
    print(
        f"\nModel-like load ({what}) and lexical.warm_up(), median of {runs} fresh processes, "
        f"{os.cpu_count()} cores:\n"
    )
    print("| mode | ready |")
    print("|---|---|")
    for mode in modes:
        print(f"| {mode} | {statistics.median(results[mode]) * 1000:.0f} ms |")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--child")
    parser.add_argument("--child-parallel")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--skip-times", action="store_true")
    parser.add_argument("--skip-equal", action="store_true")
    parser.add_argument("--cases", type=Path, nargs="*", default=[])
    parser.add_argument("--fuzz", type=int, default=20000)
    parser.add_argument("--parallel", action="store_true")
    parser.add_argument("--tokenizer", type=Path)
    parser.add_argument("--onnx", type=Path)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child)))
        return
    if args.child_parallel:
        print(json.dumps(child_parallel(args.child_parallel, args.tokenizer, args.onnx)))
        return
    if not args.skip_times:
        bench_times(args.runs)
    if not args.skip_equal:
        bench_equal(args.cases, args.fuzz)
        bench_throughput()
    if args.parallel:
        if args.tokenizer is None:
            from memself.model.offline import expanded_path

            args.tokenizer = expanded_path() / "tokenizer.json"
        bench_parallel(args.runs, args.tokenizer, args.onnx)


if __name__ == "__main__":
    main()
