"""Writes memself/text/fold_table.py, the look-alike table ``memself.text.fold`` folds text with.

    .venv/bin/python scripts/make_textfold_table.py path/to/confusables.txt

``confusables.txt`` is Unicode's (UTS #39, https://www.unicode.org/Public/security/). The table
holds, for each character outside ASCII that a reader could take for something the inert checks
look for, what it passes for:

- compatibility forms (NFKD: full-width, mathematical, circled, superscript letters and digits,
  small forms of punctuation), with their marks dropped;
- confusables whose prototype is ASCII (Cyrillic and Greek letters, odd colons, hyphens, angle
  quotation marks), a capital read as a capital (Greek Iota is an I, not the l of its prototype);
- small capitals (which confusables.txt mostly leaves out) as their lower-case letter;
- every angle bracket that a reader takes for ``<`` or ``>``;
- dashes as ``-``;
- Kangxi radicals and compatibility ideographs that stand for a character of a speaker label;
- combining marks of the Latin-facing blocks and variation selectors, which fold to nothing.

Characters of CJK scripts whose look-alike is ASCII punctuation (katakana NO for ``/``) are left
out, and so are CJK unified ideographs and the full-width punctuation of ordinary Chinese text
(``textfold.plain_char``): a line made of them and ASCII skips the table. The label check spells
out the variants it needs (用戸 beside 用户 and 用戶). The result depends on the running Python's
Unicode version for NFKD; it is checked in, so regenerate only to move to a newer confusables.txt.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from memself.text.fold import plain_char

OUT = Path(__file__).resolve().parent.parent / "memself" / "textfold_table.py"

# The characters of speaker labels in CJK scripts (``memself.text.messages``): a radical or compatibility
# ideograph that decomposes to one of them folds to it.
LABEL_HAN = set("用户戶戸使者系统統助手理人类類开開发發")
# Blocks of combining marks that sit on Latin letters, and the variation selectors.
MARK_BLOCKS = [
    (0x0300, 0x036F),
    (0x1AB0, 0x1AFF),
    (0x1DC0, 0x1DFF),
    (0x20D0, 0x20FF),
    (0xFE20, 0xFE2F),
    (0xFE00, 0xFE0F),
    (0x180B, 0x180F),
    (0xE0100, 0xE01EF),
]
# ‹ ﹤ ＜ 〈 (CJK and technical) ⟨ ❬ ❮ ❰ ⧼ ˂ ᐸ, and their closing partners.
OPEN_ANGLES = "\u2039\ufe64\uff1c\u3008\u2329\u27e8\u276c\u276e\u2770\u29fc\u02c2\u1438"
CLOSE_ANGLES = "\u203a\ufe65\uff1e\u3009\u232a\u27e9\u276d\u276f\u2771\u29fd\u02c3\u1433"


def cjk(cp: int) -> bool:
    return (
        0x2E80 <= cp <= 0x2FDF
        or 0x3040 <= cp <= 0x30FF
        or 0x31F0 <= cp <= 0x31FF
        or 0x3400 <= cp <= 0x9FFF
        or 0xAC00 <= cp <= 0xD7AF
        or 0xF900 <= cp <= 0xFAFF
        or cp >= 0x20000
    )


def read_confusables(path: Path) -> tuple[dict[str, str], str]:
    table: dict[str, str] = {}
    version = ""
    for line in path.read_text(encoding="utf-8-sig").splitlines():
        if line.startswith("# Version:"):
            version = line.split(":", 1)[1].strip()
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        source, target = (part.strip() for part in line.split(";")[:2])
        table[chr(int(source, 16))] = "".join(chr(int(cp, 16)) for cp in target.split())
    return table, version


def plain(text: str) -> str:
    """NFKD without combining marks."""
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))


def fold(char: str, confusables: dict[str, str]) -> str | None:
    """What ``char`` passes for, or None when it stays as it is."""
    cp = ord(char)
    if any(lo <= cp <= hi for lo, hi in MARK_BLOCKS):
        return ""
    if plain_char(char):
        return None  # ordinary Chinese text: ``textfold`` skips the table for it
    if char in OPEN_ANGLES:
        return "<"
    if char in CLOSE_ANGLES:
        return ">"
    if unicodedata.category(char) == "Pd":
        return "-"
    name = unicodedata.name(char, "")
    small_cap = re.fullmatch(r"LATIN LETTER SMALL CAPITAL ([A-Z])", name)
    if small_cap:
        return small_cap.group(1).lower()
    decomposed = plain(char)
    if decomposed and decomposed != char and (decomposed.isascii() or decomposed in LABEL_HAN):
        return decomposed
    prototype = confusables.get(char)
    if prototype is not None:
        prototype = plain(prototype)
        if prototype.isascii() and prototype.isprintable() and not cjk(cp):
            if prototype == "l" and char.isupper():
                return "I"
            return prototype
        if prototype in LABEL_HAN:
            return prototype
    return None


def build(confusables: dict[str, str]) -> tuple[str, str, str, dict[str, str]]:
    one_from, one_to, gone, many = [], [], [], {}
    for cp in range(0x80, sys.maxunicode + 1):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        char = chr(cp)
        folded = fold(char, confusables)
        if folded is None or folded == char:
            continue
        if folded == "":
            gone.append(char)
        elif len(folded) == 1:
            one_from.append(char)
            one_to.append(folded)
        else:
            many[char] = folded
    return "".join(one_from), "".join(one_to), "".join(gone), many


def literal(text: str) -> str:
    """A Python string literal of ``text`` that a reader can check: printable ASCII as it is,
    everything else escaped."""
    out = []
    for c in text:
        if c.isascii() and c.isprintable() and c not in '\\"':
            out.append(c)
        elif ord(c) <= 0xFFFF:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(f"\\U{ord(c):08x}")
    return '"' + "".join(out) + '"'


def wrapped(name: str, text: str, width: int = 92) -> str:
    """``name = (...)``: ``text`` as a literal cut into lines, never inside an escape."""
    pieces, line = [], ""
    for c in text:
        token = literal(c)[1:-1]
        if len(line) + len(token) > width:
            pieces.append(line)
            line = ""
        line += token
    pieces.append(line)
    body = "\n".join(f'    "{piece}"' for piece in pieces)
    return f"{name} = (\n{body}\n)\n"


HEADER = '''"""The look-alike table of ``memself.text.fold``: generated by scripts/make_textfold_table.py
from Unicode's confusables.txt (UTS #39, version {version}) and NFKD; do not edit by hand.

``ONE_FROM[i]`` passes for ``ONE_TO[i]``; each of ``GONE`` folds to nothing; ``MANY_FROM[i]``
passes for the several characters of the i-th part of ``MANY_TO`` (parts split by ``\\x1e``).

Derived from Unicode data files, under this notice:

{notice}
"""

# fmt: off
'''

NOTICE = """UNICODE LICENSE V3

COPYRIGHT AND PERMISSION NOTICE

Copyright © 1991-2025 Unicode, Inc.

NOTICE TO USER: Carefully read the following legal agreement. BY
DOWNLOADING, INSTALLING, COPYING OR OTHERWISE USING DATA FILES, AND/OR
SOFTWARE, YOU UNEQUIVOCALLY ACCEPT, AND AGREE TO BE BOUND BY, ALL OF THE
TERMS AND CONDITIONS OF THIS AGREEMENT. IF YOU DO NOT AGREE, DO NOT
DOWNLOAD, INSTALL, COPY, DISTRIBUTE OR USE THE DATA FILES OR SOFTWARE.

Permission is hereby granted, free of charge, to any person obtaining a
copy of data files and any associated documentation (the "Data Files") or
software and any associated documentation (the "Software") to deal in the
Data Files or Software without restriction, including without limitation
the rights to use, copy, modify, merge, publish, distribute, and/or sell
copies of the Data Files or Software, and to permit persons to whom the
Data Files or Software are furnished to do so, provided that either (a)
this copyright and permission notice appear with all copies of the Data
Files or Software, or (b) this copyright and permission notice appear in
associated Documentation.

THE DATA FILES AND SOFTWARE ARE PROVIDED "AS IS", WITHOUT WARRANTY OF ANY
KIND, EXPRESS OR IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF
MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT OF
THIRD PARTY RIGHTS.

IN NO EVENT SHALL THE COPYRIGHT HOLDER OR HOLDERS INCLUDED IN THIS NOTICE
BE LIABLE FOR ANY CLAIM, OR ANY SPECIAL INDIRECT OR CONSEQUENTIAL DAMAGES,
OR ANY DAMAGES WHATSOEVER RESULTING FROM LOSS OF USE, DATA OR PROFITS,
WHETHER IN AN ACTION OF CONTRACT, NEGLIGENCE OR OTHER TORTIOUS ACTION,
ARISING OUT OF OR IN CONNECTION WITH THE USE OR PERFORMANCE OF THE DATA
FILES OR SOFTWARE.

Except as contained in this notice, the name of a copyright holder shall
not be used in advertising or otherwise to promote the sale, use or other
dealings in these Data Files or Software without prior written
authorization of the copyright holder.

SPDX-License-Identifier: Unicode-3.0"""


def main() -> None:
    confusables, version = read_confusables(Path(sys.argv[1]))
    one_from, one_to, gone, many = build(confusables)
    text = HEADER.format(version=version or "unknown", notice=NOTICE)
    text += wrapped("ONE_FROM", one_from) + wrapped("ONE_TO", one_to) + wrapped("GONE", gone)
    text += wrapped("MANY_FROM", "".join(sorted(many)))
    text += wrapped("MANY_TO", "\x1e".join(many[k] for k in sorted(many)))
    text += "# fmt: on\n"
    OUT.write_text(text, encoding="utf-8")
    print(f"{OUT}: {len(one_from)} one-to-one, {len(gone)} dropped, {len(many)} to several")


if __name__ == "__main__":
    main()
