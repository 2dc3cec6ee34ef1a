"""The lexical signal's tokens and tables: rjieba gives jieba's tokens, warm-up loads everything
once, and the IDF cache is rebuilt whenever it is stale or damaged."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from memself.recall import lexical
from memself.recall.lexical import UNKNOWN_IDF, IdfTable, cache_path, load_idf_table, parse_idf

REPO = Path(__file__).resolve().parent.parent

# Written for this test: everyday prompts, identifiers, long and short runs, traditional and rare
# characters, and characters past U+9FD5 that jieba does not treat as Chinese.
TEXTS = [
    "帮我看一下运单详情页面为什么加载这么慢",
    "WaybillDetailPage 里调了 /api/v2/waybill 三次，config.go 的超时也不对",
    "给 CalcFreight 补几个表驱动的单元测试，重量段边界要覆盖到",
    "南京市长江大桥的通车时间是哪一年",
    "我们在中国科学技术大学的研究生院里讨论了结巴分词的隐马尔可夫模型",
    "這個函數為什麼會報錯，幫我看看繁體字的處理",
    "小明硕士毕业于中国科学院计算所，后在日本京都大学深造",
    "動鿢山群传承文明",
    "中村鿪杅紀啴南京航空航天大学官库",
    "兛鿭鿞簻",
    "鿕鿖鿗鿘",
    "一",
    "",
    "just english words and snake_case_names with camelCaseToo",
    "提交前跑一下 make lint，golangci-lint 报的 errcheck 全部修掉" * 20,
]


@pytest.fixture(scope="module")
def jieba_tokens():
    """What memself computed before: jieba's lcut_for_search on whole runs, the parsed dict."""
    import jieba

    jieba.setLogLevel(60)
    table = parse_idf(lexical.idf_source_path())
    return lambda text: lexical.tokens_with(text, jieba.lcut_for_search, lambda w: table.get(w, UNKNOWN_IDF))


@pytest.fixture
def fresh_state(monkeypatch, tmp_path):
    """No tables loaded yet, and a model cache of this test's own."""
    monkeypatch.setenv("MEMSELF_MODEL_CACHE", str(tmp_path / "models"))
    monkeypatch.setattr(lexical, "_lexicon", None)
    monkeypatch.setattr(lexical, "load_count", 0)


# ------------------------------------------------------------------------ the same tokens as jieba


def test_tokens_equal_jiebas_on_fixed_and_shipped_texts(jieba_tokens):
    texts = list(TEXTS)
    for name in ("background_sentences.json", "memself/data/general_prompts.json"):
        texts += json.loads((REPO / name).read_text("utf-8"))
    different = [t for t in texts if lexical.tokens(t) != jieba_tokens(t)]
    assert different == []
    assert lexical.tokens("帮我看一下运单详情页面")["运单"] == pytest.approx(12.2912397395)


def test_runs_are_cut_where_jieba_stops_treating_characters_as_chinese(jieba_tokens):
    import rjieba

    # Handing the whole run to jieba-rs would join the characters past U+9FD5 with their neighbours.
    whole_runs = lexical.tokens_with(
        "動鿢山群传承文明", lambda run: rjieba.cut_for_search(run, True), lexical.idf
    )
    assert "山群" in whole_runs
    assert lexical.tokens("動鿢山群传承文明") == jieba_tokens("動鿢山群传承文明")
    assert "山群" not in lexical.tokens("動鿢山群传承文明")
    assert lexical.tokens("兛鿭鿞簻") == {} == jieba_tokens("兛鿭鿞簻")


def test_new_path_never_imports_jieba():
    code = (
        "import sys; from memself.recall import lexical; lexical.warm_up(); lexical.tokens('运单详情');"
        "import json; print(json.dumps(sorted(m for m in sys.modules"
        " if m.split('.')[0] in ('jieba', 'rjieba'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert json.loads(out.stdout) == ["rjieba", "rjieba.rjieba"]


# ------------------------------------------------------------------------------------- warm-up


def test_tokens_after_warm_up_load_nothing(fresh_state, tmp_path):
    assert lexical.warm_up() == "source"  # a fresh cache: parsed, then written
    loaded = lexical._lexicon
    assert lexical.load_count == 1 and loaded is not None
    assert lexical.tokens("帮我看一下运单详情页面")
    assert lexical.load_count == 1 and lexical._lexicon is loaded
    assert cache_path(tmp_path / "models").is_file()


def test_tokens_without_warm_up_load_once(fresh_state):
    lexical.tokens("运单详情")
    lexical.tokens("司机端")
    assert lexical.load_count == 1


def test_warm_up_from_threads_while_tokens_are_asked_for(fresh_state, jieba_tokens):
    results: list[dict[str, float]] = []
    threads = [threading.Thread(target=lexical.warm_up) for _ in range(3)]
    threads += [threading.Thread(target=lambda: results.append(lexical.tokens(TEXTS[4]))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert lexical.load_count == 1
    assert results == [jieba_tokens(TEXTS[4])] * 3


# ------------------------------------------------------------------------------ the IDF cache


def write_idf(path: Path, table: dict[str, float]) -> Path:
    path.write_text("".join(f"{w} {v}\n" for w, v in table.items()), encoding="utf-8")
    return path


def test_cached_table_gives_every_value_of_jiebas_file(tmp_path):
    source = lexical.idf_source_path()
    parsed = parse_idf(source)
    built, origin = load_idf_table(tmp_path, source)
    cached, origin2 = load_idf_table(tmp_path, source)
    assert (origin, origin2) == ("source", "cache")
    assert len(cached) == len(parsed) == len(built)
    assert all(cached.get(w) == v for w, v in parsed.items())
    assert cached.get("不在表里的词xyz") == UNKNOWN_IDF and cached.get("waybill") == UNKNOWN_IDF
    assert cached.get("\ud800") == UNKNOWN_IDF  # a lone surrogate is a miss, not an error


def test_small_table_with_collisions(tmp_path):
    table = {f"词{i}": i / 7 for i in range(5000)}
    loaded = IdfTable.from_bytes(IdfTable.build(table).to_bytes(b"k" * 32), b"k" * 32)
    assert loaded is not None
    assert all(loaded.get(w) == v for w, v in table.items())
    assert [loaded.get(f"词{i}", -1.0) for i in range(5000, 5100)] == [-1.0] * 100


def test_stale_cache_is_rebuilt_when_the_source_changes(tmp_path):
    source = write_idf(tmp_path / "idf.txt", {"运单": 10.0, "详情": 8.0})
    assert load_idf_table(tmp_path, source)[1] == "source"
    assert load_idf_table(tmp_path, source)[1] == "cache"
    write_idf(source, {"运单": 3.0, "司机": 9.5})
    table, origin = load_idf_table(tmp_path, source)
    assert origin == "source"
    assert (table.get("运单"), table.get("司机"), table.get("详情")) == (3.0, 9.5, UNKNOWN_IDF)
    assert load_idf_table(tmp_path, source)[1] == "cache"


def test_same_size_and_content_but_new_mtime_rebuilds(tmp_path):
    source = write_idf(tmp_path / "idf.txt", {"运单": 10.0})
    load_idf_table(tmp_path, source)
    st = source.stat()
    os.utime(source, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert load_idf_table(tmp_path, source)[1] == "source"


def test_cache_of_another_source_is_not_used(tmp_path):
    a = write_idf(tmp_path / "a.txt", {"运单": 10.0})
    b = write_idf(tmp_path / "b.txt", {"运单": 20.0})
    os.utime(b, ns=(a.stat().st_atime_ns, a.stat().st_mtime_ns))  # same size and mtime
    load_idf_table(tmp_path, a)
    table, origin = load_idf_table(tmp_path, b)
    assert origin == "source" and table.get("运单") == 20.0


@pytest.mark.parametrize("damage", ["flip-body", "truncate", "empty", "garbage", "header-only"])
def test_damaged_cache_is_rebuilt(tmp_path, damage):
    source = write_idf(tmp_path / "idf.txt", {f"词{i}": float(i) for i in range(200)})
    load_idf_table(tmp_path, source)
    path = cache_path(tmp_path)
    data = bytearray(path.read_bytes())
    if damage == "flip-body":
        data[-10] ^= 0x55
    elif damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "empty":
        data = bytearray()
    elif damage == "garbage":
        data = bytearray(os.urandom(len(data)))
    else:
        data = data[: lexical._HEADER.size]
    path.write_bytes(bytes(data))
    table, origin = load_idf_table(tmp_path, source)
    assert origin == "source" and table.get("词42") == 42.0
    assert load_idf_table(tmp_path, source)[1] == "cache"  # and the good file is back


def _forge(tmp_path: Path, source: Path, table: IdfTable, **header: int) -> None:
    """A cache whose checksum is right but whose structure is not (what a checksum cannot catch)."""
    key = lexical._source_key(source)
    data = table.to_bytes(key)
    magic, _, _, n, n_slots, max_probe = lexical._HEADER.unpack_from(data)
    body = data[lexical._HEADER.size :]
    if "slots" in header:  # point every slot past the end of the word list
        fixed = 8 * n + 4 * (n + 1)
        body = body[:fixed] + bytes([0x7F]) * (4 * n_slots) + body[fixed + 4 * n_slots :]
    fields = {"n": n, "n_slots": n_slots, "max_probe": max_probe, **header}
    cache_path(tmp_path).write_bytes(
        lexical._HEADER.pack(
            magic, key, hashlib.sha256(body).digest(), fields["n"], fields["n_slots"], fields["max_probe"]
        )
        + body
    )


@pytest.mark.parametrize(
    "header", [{"n_slots": 1000}, {"n": 10**9}, {"max_probe": 0}, {"max_probe": 1 << 30}, {"n_slots": 1}]
)
def test_cache_with_a_valid_checksum_but_bad_shape_is_refused(tmp_path, header):
    source = write_idf(tmp_path / "idf.txt", {f"词{i}": float(i) for i in range(100)})
    table, _ = load_idf_table(tmp_path, source)
    _forge(tmp_path, source, table, **header)
    again, origin = load_idf_table(tmp_path, source)
    assert origin == "source" and again.get("词7") == 7.0


def test_forged_slots_give_unknown_words_not_errors(tmp_path):
    source = write_idf(tmp_path / "idf.txt", {f"词{i}": float(i) for i in range(100)})
    table, _ = load_idf_table(tmp_path, source)
    _forge(tmp_path, source, table, slots=1)
    forged, origin = load_idf_table(tmp_path, source)
    assert origin == "cache"  # the shape is plausible: it loads, and lookups stay safe
    assert [forged.get(f"词{i}") for i in range(100)] == [UNKNOWN_IDF] * 100


def test_unwritable_cache_still_gives_the_table(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    source = write_idf(tmp_path / "idf.txt", {"运单": 10.0})
    table, origin = load_idf_table(blocker, source)
    assert origin == "source" and table.get("运单") == 10.0
    assert not (tmp_path / "lexical").exists()


def test_unreadable_source_is_a_clear_error(tmp_path):
    with pytest.raises(lexical.LexicalDataError, match="词频表"):
        load_idf_table(tmp_path, tmp_path / "missing.txt")
    bad = tmp_path / "bad.txt"
    bad.write_text("运单 abc\n", encoding="utf-8")
    with pytest.raises(lexical.LexicalDataError, match="词频表"):
        load_idf_table(tmp_path, bad)
