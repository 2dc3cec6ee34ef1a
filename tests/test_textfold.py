"""The look-alike fold behind ``texts.inert``: what the table holds, the shortcut that skips it,
and the map from folded text back to the line."""

from __future__ import annotations

import unicodedata

from memself.text import fold as textfold
from memself.text.fold import fold, plain_char


def test_lines_the_shortcut_skips_have_nothing_to_fold() -> None:
    """The shortcut (ASCII, CJK ideographs, Chinese punctuation) is safe only if the table maps
    none of those characters."""
    table = textfold._load()
    skipped = [hex(cp) for cp in table if plain_char(chr(cp))]
    assert skipped == []
    line = "支付模块第 3 项约定：统一使用 flag_3 配置，负责人见 wiki 第 3 页。《三体》「引号」"
    assert fold(line).origin is None and line.translate(table) == line


def test_table_folds_each_kind() -> None:
    cases = {
        "МЕМОRҮ": "MEMORY",  # Cyrillic capitals
        "ΑΙ": "AI",  # Greek capitals: Iota is an I, not the l of its prototype
        "Ｖ１": "V1",  # full-width
        "𝐒𝐲𝐬": "Sys",  # mathematical bold
        "ꜱʏꜱᴛᴇᴍ": "system",  # small capitals
        "﹕꞉ː∶": "::::",  # colons
        "‐–—−": "----",  # dashes
        "‹›﹤﹥〈〉\u2329\u232a❮❯": "<><><><><>",  # angle brackets
        "⽤户": "用户",  # a Kangxi radical
        "conﬁrm": "confirm",  # a ligature folds to two letters
        "Hu\u0301man\ufe0f": "Human",  # a combining mark and a variation selector fold to nothing
        "Привет": "Пpивeт",  # only letters that pass for Latin ones
    }
    for line, expected in cases.items():
        assert fold(line).text == expected, (line, fold(line).text)


def test_span_maps_folded_text_back_to_the_line() -> None:
    line = "a conﬁrm Hu\u0301man: ‹x›"
    folded = fold(line)
    assert folded.text == "a confirm Human: <x>"
    start = folded.text.index("Human")
    begin, end = folded.span(start, start + len("Human"))
    assert line[begin:end] == "Hu\u0301man"
    fi = folded.text.index("fi")
    assert folded.span(fi, fi + 1) == (line.index("ﬁ"), line.index("ﬁ") + 1)  # half a ligature
    assert folded.span(fi, fi + 2) == (line.index("ﬁ"), line.index("ﬁ") + 1)
    assert folded.span(len(folded.text), len(folded.text)) == (len(line), len(line))


def test_folded_text_keeps_no_marks() -> None:
    folded = fold("Ｈｕ\u0336ｍａｎ\U000e0101 系統")
    assert not any(unicodedata.combining(c) for c in folded.text)
    assert folded.text == "Human 系統"
