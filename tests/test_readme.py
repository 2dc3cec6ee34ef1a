"""The README's runnable examples run, and the two READMEs have the same shape.

A fenced ```bash block right after a line ``<!-- runnable -->`` is an example a new user can paste
as it is: it runs here with ``bash -e`` in a fresh HOME and MEMSELF_HOME, ``memself`` on PATH
(the venv's), the offline model configured first (an example may set it again itself), the
prepared test model cache, and no route to the model hub. It must exit 0, and each ``#> TEXT``
line in it is a line the reader is told memself prints: the output must contain them, in order.

README.md and README.zh-CN.md are one text in two languages: the same headings at the same levels
in the same order, the same number of fenced blocks and of runnable markers, and the same commands
and printed lines in their runnable blocks (only the comments are translated). Each is at most
MAX_LINES long, for a first read; what a contributor or a curious user needs beyond that lives in
docs/, and every docs/ link in either README names a file (and a heading) that exists.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
README_ZH = REPO / "README.zh-CN.md"
MARKER = "<!-- runnable -->"
EXPECTED = "#> "
MAX_LINES = 250
OFFLINE_MODEL = "multilingual-e5-small"
BLOCK_TIMEOUT_S = 600
_FENCE = re.compile(r"^(\s*)(```+|~~~+)(.*)$")
_HEADING = re.compile(r"^(#{1,6})\s+\S")


@dataclass(frozen=True)
class Block:
    start: int  # 1-based line number of the opening fence
    info: str  # what follows the opening fence (``bash``)
    body: str
    runnable: bool  # the line before the fence is the marker

    @property
    def label(self) -> str:
        return f"README.md:{self.start}"


@dataclass(frozen=True)
class Shape:
    headings: list[int]  # the level of each heading, in order
    blocks: int
    markers: int


def parse(text: str) -> tuple[list[Block], Shape]:
    """Fenced blocks and the heading levels outside them; a marker counts only right before a
    fence (a marker anywhere else is a mistake the shape test shows as a count difference)."""
    blocks: list[Block] = []
    headings: list[int] = []
    markers = 0
    lines = text.splitlines()
    fence: str | None = None
    start, info, body = 0, "", []
    for number, line in enumerate(lines, start=1):
        match = _FENCE.match(line)
        if fence is None:
            if match:
                fence, start, info, body = match.group(2), number, match.group(3).strip(), []
                continue
            if line.strip() == MARKER:
                markers += 1
            heading = _HEADING.match(line)
            if heading:
                headings.append(len(heading.group(1)))
        elif match and match.group(2).startswith(fence[0]) and len(match.group(2)) >= len(fence):
            if not match.group(3).strip():
                previous = lines[start - 2].strip() if start >= 2 else ""
                blocks.append(Block(start, info, "\n".join(body) + "\n", previous == MARKER))
                fence = None
                continue
            body.append(line)
        else:
            body.append(line)
    return blocks, Shape(headings, len(blocks), markers)


def runnable_blocks() -> list[Block]:
    blocks, _ = parse(README.read_text(encoding="utf-8"))
    return [b for b in blocks if b.runnable]


def test_the_readme_has_runnable_examples() -> None:
    blocks, shape = parse(README.read_text(encoding="utf-8"))
    assert runnable_blocks(), f"no ```bash block in README.md follows a line {MARKER!r}"
    misplaced = shape.markers - len(runnable_blocks())
    assert misplaced == 0, f"{misplaced} {MARKER!r} line(s) not right before a fenced block"
    wrong = [b.label for b in blocks if b.runnable and b.info.split()[:1] != ["bash"]]
    assert not wrong, f"runnable blocks must be ```bash: {wrong}"


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def example_env(isolated_home: Path, model_cache: Path, tmp_path: Path) -> dict[str, str]:
    """A new user's shell: fresh HOME and data dir, ``memself`` on PATH, the offline model."""
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "memself").exists(), f"no memself beside {sys.executable}: run ./installers/install.sh"
    env = {
        "HOME": str(isolated_home),
        "MEMSELF_HOME": os.environ["MEMSELF_HOME"],
        "MEMSELF_MODEL_CACHE": str(model_cache),
        "PATH": f"{bin_dir}{os.pathsep}/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HF_ENDPOINT": f"http://127.0.0.1:{_closed_port()}",
        "HF_HOME": str(tmp_path / "hf-home"),
        "TMPDIR": str(tmp_path),
    }
    done = subprocess.run(
        ["memself", "config", "model", OFFLINE_MODEL],
        env=env,
        cwd=isolated_home,
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return env


@pytest.mark.parametrize("block", runnable_blocks(), ids=lambda b: b.label)
def test_runnable_example(block: Block, example_env: dict[str, str], isolated_home: Path) -> None:
    done = subprocess.run(
        ["bash", "-e", "-c", block.body],
        env=example_env,
        cwd=isolated_home,
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 0, (
        f"{block.label} exited {done.returncode}\n--- block\n{block.body}--- stdout\n"
        f"{done.stdout[-3000:]}--- stderr\n{done.stderr[-3000:]}"
    )
    missing = missing_lines(expected_lines(block.body), done.stdout)
    assert not missing, (
        f"{block.label}: the README says memself prints {missing!r}\n--- stdout\n{done.stdout[-3000:]}"
    )


def expected_lines(body: str) -> list[str]:
    return [line.strip()[len(EXPECTED) :] for line in body.splitlines() if line.strip().startswith(EXPECTED)]


def missing_lines(expected: list[str], output: str) -> list[str]:
    """The expected lines the output lacks, looking for each after the one before it."""
    lines = output.splitlines()
    at = 0
    for i, wanted in enumerate(expected):
        found = next((n for n in range(at, len(lines)) if lines[n].strip() == wanted.strip()), None)
        if found is None:
            return expected[i:]
        at = found + 1
    return []


def test_the_readmes_stay_short() -> None:
    for path in (README, README_ZH):
        count = len(path.read_text(encoding="utf-8").splitlines())
        assert count <= MAX_LINES, (
            f"{path.name} has {count} lines, at most {MAX_LINES}: move details to docs/"
        )


def _commands(block: Block) -> list[str]:
    """A runnable block without its comments: the commands, and the printed lines it promises."""
    kept = []
    for line in block.body.splitlines():
        if line.strip().startswith(EXPECTED):
            kept.append(line.strip())
            continue
        code = re.sub(r"\s+#\s.*$", "", line).rstrip()
        if code and not code.lstrip().startswith("#"):
            kept.append(code)
    return kept


def test_the_chinese_readme_runs_the_same_examples() -> None:
    """Only README.md's examples are run: the Chinese ones must be the same commands."""
    en = [_commands(b) for b in parse(README.read_text(encoding="utf-8"))[0] if b.runnable]
    zh = [_commands(b) for b in parse(README_ZH.read_text(encoding="utf-8"))[0] if b.runnable]
    assert en == zh


_DOC_LINK = re.compile(r"\]\((docs/[^)#\s]+)(#[^)\s]*)?\)")


def test_the_readmes_docs_links_resolve() -> None:
    for path in (README, README_ZH):
        links = _DOC_LINK.findall(path.read_text(encoding="utf-8"))
        assert links, f"{path.name} links to nothing in docs/"
        broken = sorted({target for target, _ in links if not (REPO / target).is_file()})
        assert not broken, f"{path.name} links to missing files: {broken}"
        bad = sorted(
            {
                f"{target}{anchor}"
                for target, anchor in links
                if anchor and anchor[1:] not in anchors((REPO / target).read_text(encoding="utf-8"))
            }
        )
        assert not bad, f"{path.name} links to missing headings: {bad}"


def anchors(markdown: str) -> set[str]:
    """The anchors a markdown renderer gives the headings (lower case, punctuation dropped, spaces
    to hyphens), outside fenced blocks."""
    found: set[str] = set()
    fence = False
    for line in markdown.splitlines():
        if _FENCE.match(line):
            fence = not fence
            continue
        if fence or not _HEADING.match(line):
            continue
        title = line.lstrip("#").strip().lower()
        found.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return found


def test_english_and_chinese_readmes_have_the_same_shape() -> None:
    _, en = parse(README.read_text(encoding="utf-8"))
    _, zh = parse(README_ZH.read_text(encoding="utf-8"))
    assert en.headings == zh.headings, _first_difference(en.headings, zh.headings)
    assert (en.blocks, en.markers) == (zh.blocks, zh.markers), (
        f"fenced blocks en {en.blocks} / zh {zh.blocks}; runnable markers en {en.markers} / zh {zh.markers}"
    )


def _first_difference(en: list[int], zh: list[int]) -> str:
    for i, (a, b) in enumerate(zip(en, zh, strict=False)):
        if a != b:
            return f"heading #{i + 1}: level {a} in README.md, {b} in README.zh-CN.md"
    return f"README.md has {len(en)} headings, README.zh-CN.md {len(zh)}"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("# A\n\n<!-- runnable -->\n```bash\necho hi\n```\n", (1, True, [1], 1)),
        ("## A\n```bash\n# not a heading\n```\n### B\n", (1, False, [2, 3], 0)),
        ("<!-- runnable -->\n\n```bash\necho hi\n```\n", (1, False, [], 1)),
        ("````md\n```bash\nx\n```\n````\n# C\n", (1, False, [1], 0)),
    ],
)
def test_parse(text: str, expected: tuple[int, bool, list[int], int]) -> None:
    blocks, shape = parse(text)
    assert (len(blocks), blocks[0].runnable, shape.headings, shape.markers) == expected


def test_anchors() -> None:
    text = "# Recall: the signals\n```bash\n# not a heading\n```\n## Held out (shipped)\n"
    assert anchors(text) == {"recall-the-signals", "held-out-shipped"}


def test_expected_lines_are_found_in_order_only() -> None:
    body = "memself a\n#> 一\nmemself b  # a comment\n#> 二\n"
    assert expected_lines(body) == ["一", "二"]
    assert missing_lines(["一", "二"], "x\n一\ny\n二\n") == []
    assert missing_lines(["一", "二"], "二\n一\n") == ["二"]
    assert missing_lines(["一"], "一二\n") == ["一"]
