"""The engine lives for hours and sees a new prompt, workspace and session every few seconds:
nothing it holds may grow with what it has seen. One test per thing that grew:

- the word-embedding table's pages: a memory map kept every row any text touched resident (now
  rows are read into a fixed number of slots);
- glibc's malloc arenas: one per connection thread, each keeping what it freed;
- the IDF memo of the lexical signal: one entry per distinct word, up to 65,536.

And one thing that did not grow but stayed resident for nothing: a Python copy of the tokenizer's
vocabulary.

The whole engine is measured by ``bench/bench_engine_soak.py``.
"""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from memself.engine.heap import ARENAS
from memself.recall import lexical


def rss_file_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssFile:"):
            return int(line.split()[1])
    raise AssertionError("no RssFile")


def random_han(rng: random.Random, count: int) -> str:
    return "".join(chr(rng.randint(0x4E00, 0x9FA5)) for _ in range(count))


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads RSS from /proc")
def test_embedding_rows_of_new_words_do_not_stay_resident(e5_encoder) -> None:
    rng = random.Random(11)
    e5_encoder.encode_queries([random_han(rng, 60)])  # the runtime's own pages, once
    before = rss_file_kb()
    for _ in range(60):
        e5_encoder.encode_queries([random_han(rng, 80)])  # thousands of rows never read before
    grown_mb = (rss_file_kb() - before) / 1024
    assert grown_mb < 4, f"mapped-file RSS grew {grown_mb:.1f} MB over 60 prompts of new words"


_ARENA_PROBE = textwrap.dedent(
    """
    import ctypes, sys, tempfile, threading
    from memself.engine.heap import limit_arenas
    if sys.argv[1] == "limit":
        limit_arenas()
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.fopen.restype = ctypes.c_void_p
    libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
    libc.fclose.argtypes = [ctypes.c_void_p]
    barrier = threading.Barrier(13)
    def work():
        libc.malloc(4096)  # this thread's first malloc picks its arena
        barrier.wait()
        barrier.wait()
    threads = [threading.Thread(target=work) for _ in range(12)]
    for t in threads:
        t.start()
    barrier.wait()
    with tempfile.NamedTemporaryFile(suffix=".xml") as out:
        handle = libc.fopen(out.name.encode(), b"w")
        libc.malloc_info(0, handle)
        libc.fclose(handle)
        print(open(out.name).read().count("<heap nr="))
    barrier.wait()
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's arenas")
def test_engine_heap_keeps_a_fixed_number_of_arenas() -> None:
    def arenas(mode: str) -> int:
        done = subprocess.run(
            [sys.executable, "-c", _ARENA_PROBE, mode], capture_output=True, text=True, timeout=60, check=True
        )
        return int(done.stdout.strip())

    assert arenas("free") > ARENAS  # the control: twelve threads, twelve-odd arenas
    assert arenas("limit") <= ARENAS


def test_idf_memo_is_bounded() -> None:
    rng = random.Random(5)
    memo = lexical._get().idf
    limit = memo.cache_info().maxsize  # type: ignore[attr-defined]
    assert limit is not None and limit <= 4096
    for _ in range(limit + 500):
        lexical.idf(random_han(rng, 3))
    assert memo.cache_info().currsize <= limit  # type: ignore[attr-defined]


def test_row_cache_is_bounded_and_exact(shared_model_cache: Path) -> None:
    import numpy as np

    from memself.model.row_table import RowTable

    table_file = next(shared_model_cache.rglob("embeddings.npy"))
    reference = np.load(table_file, mmap_mode="r")
    table = RowTable(table_file, cached_rows=64)
    rng = np.random.default_rng(3)
    for _ in range(200):
        ids = rng.integers(0, 400, size=(int(rng.integers(1, 4)), int(rng.integers(1, 100))))
        assert np.array_equal(table.take(ids), np.take(reference, ids, axis=0))
        assert table.cached <= 64
    with pytest.raises(IndexError):
        table.take(np.array([[reference.shape[0]]]))


def test_the_compact_tokenizer_keeps_no_python_copy_of_its_vocabulary(shared_model_cache: Path) -> None:
    """The engine holds its tokenizer for life: 250,000 pieces as Python strings, ints and floats
    next to the WordLevel model's own vocabulary were about 40 MB of its resident size."""
    import tracemalloc

    import numpy  # noqa: F401  (imported before tracing: modules are not the tokenizer's)
    import tokenizers  # noqa: F401

    from memself.model import cache, unigram
    from memself.model.catalog import OFFLINE_MODEL, resolve_model

    folder = cache.find_prepared(resolve_model(OFFLINE_MODEL), shared_model_cache).folder
    tracemalloc.start()
    try:
        tokenizer = unigram.load(folder)
        kept_mb = tracemalloc.get_traced_memory()[0] / 2**20
    finally:
        tracemalloc.stop()
    assert tokenizer.encode("query: 支付页新流程的灰度开关叫什么").ids[0] == 0
    assert kept_mb < 8, f"the tokenizer keeps {kept_mb:.1f} MB of Python objects"
