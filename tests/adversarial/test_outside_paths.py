"""Nothing the tests, benchmarks, scripts or CI read lives outside the repository.

A fresh clone has no sibling folders (``../sibling``), no ``/work`` and nobody's home: a test that
reads one passes on the machine it was written on and fails for everyone else. Every file under
``tests/``, ``bench/``, ``scripts/`` and ``.ci/`` is checked for

- string literals that are relative paths climbing out (``"../x"``, ``".."``),
- absolute paths into a workspace or a home (``/work/...``, ``/root/...``, ``/home/<user>/...``,
  ``/Users/<user>/...``); sample payloads use the made-up users in ``SAMPLE_HOMES``,
- in Python, ``Path(__file__)`` climbing above the repository (``.parents[n]``, ``.parent``
  chains), and ``.parent`` taken of a name that already holds the repository root.

A line that needs such a string as data (a traversal attack, say) carries ``# outside-path: ok``.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CHECKED_DIRS = ("tests", "bench", "scripts", ".ci")
SKIP_DIRS = {"__pycache__", ".pytest_cache", ".ruff_cache", "node_modules"}
BINARY_SUFFIXES = {".npy", ".onnx", ".png", ".whl", ".gz", ".zip", ".pyc"}
PRAGMA = "outside-path: ok"
# Made-up users of captured payloads and installer fixtures; no real home looks like these.
SAMPLE_HOMES = ("/home/dev/", "/home/u/", "/Users/dev/")

_ABSOLUTE = re.compile(r"(?<![\w.~$/-])(/work/|/root/|/home/[^/\s\"']+/|/Users/[^/\s\"']+/)")
_CLIMB = re.compile(r"""(?:^|[\s"'=(:,\[])\.\.(?:/|$|["'\s])""")


def checked_files() -> Iterator[Path]:
    for top in CHECKED_DIRS:
        root = REPO / top
        if not root.exists():
            continue
        for path in sorted(root.rglob("*")):
            if path.is_file() and not SKIP_DIRS & set(path.relative_to(REPO).parts):
                # This file holds the patterns themselves, as data.
                if path.suffix not in BINARY_SUFFIXES and path != Path(__file__).resolve():
                    yield path


def absolute_offences(line: str) -> list[str]:
    found = []
    for match in _ABSOLUTE.finditer(line):
        start = match.start()
        if any(line.startswith(sample, start) for sample in SAMPLE_HOMES):
            continue
        found.append(match.group(1))
    return found


def text_offences(path: Path, text: str) -> list[str]:
    problems = []
    for number, line in enumerate(text.splitlines(), start=1):
        if PRAGMA in line:
            continue
        for hit in absolute_offences(line):
            problems.append(f"{path.relative_to(REPO)}:{number}: absolute path {hit!r}")
        if path.suffix != ".py" and _CLIMB.search(line):
            problems.append(f"{path.relative_to(REPO)}:{number}: relative path climbing out: {line.strip()}")
    return problems


def _pragma_lines(text: str) -> set[int]:
    lines = set()
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT and PRAGMA in tok.string:
            lines.add(tok.start[0])
    return lines


def _file_climb(node: ast.AST) -> int | None:
    """How many levels ``node`` climbs from ``__file__`` (``Path(__file__).resolve().parent`` is
    1), or None when it is not such a chain."""
    if isinstance(node, ast.Attribute) and node.attr == "parent":
        inner = _file_climb(node.value)
        return None if inner is None else inner + 1
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute):
        if node.value.attr == "parents" and isinstance(node.slice, ast.Constant):
            inner = _file_climb(node.value.value)
            index = node.slice.value
            return None if inner is None or not isinstance(index, int) else inner + index + 1
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr in {"resolve", "absolute"}:
            return _file_climb(node.func.value)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Path":
        if len(node.args) == 1 and isinstance(node.args[0], ast.Name) and node.args[0].id == "__file__":
            return 0
    return None


def python_offences(path: Path, text: str) -> list[str]:
    rel = path.relative_to(REPO)
    depth = len(rel.parts)  # levels from the file up to the repository root
    tree = ast.parse(text, filename=str(path))
    allowed = _pragma_lines(text)
    problems = []
    roots: set[str] = set()  # names bound to the repository root itself
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and _file_climb(node.value) == depth:
            roots.update(t.id for t in node.targets if isinstance(t, ast.Name))
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if line in allowed:
            continue
        climb = _file_climb(node)
        if climb is not None and climb > depth:
            problems.append(f"{rel}:{line}: Path(__file__) climbs {climb} levels, above the repository")
        if isinstance(node, ast.Attribute) and node.attr in {"parent", "parents"}:
            if isinstance(node.value, ast.Name) and node.value.id in roots:
                problems.append(f"{rel}:{line}: {node.value.id}.{node.attr} is outside the repository")
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if _CLIMB.search(node.value):
                problems.append(f"{rel}:{line}: relative path climbing out: {node.value[:80]!r}")
    return problems


def offences(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return []
    problems = text_offences(path, text)
    if path.suffix == ".py":
        problems += python_offences(path, text)
    return problems


def test_no_file_refers_outside_the_repository() -> None:
    files = list(checked_files())
    assert len(files) > 50, "the walk found too few files; did the layout change?"
    problems = [problem for path in files for problem in offences(path)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('DEV = Path(__file__).resolve().parents[2] / "sibling"\n', "climbs"),
        ('REPO = Path(__file__).resolve().parent.parent\nX = REPO.parent / "sibling"\n', "REPO.parent"),
        ('CASES = "../sibling/eval/dev-cases.json"\n', "climbing out"),
        ('CASES = "/work/sibling/eval/dev-cases.json"\n', "/work/"),
        ('HOME = "/home/alice/.cache/x"\n', "/home/alice/"),
        ('ROOT = "/root/.cache/models"\n', "/root/"),
    ],
)
def test_the_check_catches(source: str, expected: str) -> None:
    """The checker itself, on offending files placed as a test file would be (tests/x.py)."""
    path = REPO / "tests" / "offender_example.py"
    problems = text_offences(path, source) + python_offences(path, source)
    assert any(expected in p for p in problems), problems


@pytest.mark.parametrize(
    "source",
    [
        'REPO = Path(__file__).resolve().parent.parent\nDATA = REPO / "tests" / "fixtures"\n',
        'PAYLOAD = {"cwd": "/home/dev/project"}\n',
        'TMP = "/tmp/a//b/"\n',
        'ATTACK = "../../config"  # outside-path: ok (a traversal attempt, as data)\n',
    ],
)
def test_the_check_lets_through(source: str) -> None:
    path = REPO / "tests" / "offender_example.py"
    assert text_offences(path, source) + python_offences(path, source) == []


def test_shell_lines() -> None:
    path = REPO / "scripts" / "example.sh"
    assert text_offences(path, 'cd "$(dirname "$0")/.."\n') == []
    assert text_offences(path, "cat ../sibling/eval/dev-cases.json\n")
    assert text_offences(path, "python x.py --cases /work/sibling/eval/x.json\n")
