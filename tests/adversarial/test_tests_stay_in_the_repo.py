"""No test reads data from outside the repository: a test that needs case files or fixtures finds
them in the checkout (``eval/``, ``tests/fixtures``), so the suite runs the same from any clone."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
# A path climbing above the repository (parents[2] of a test file is the repo's parent), the
# sibling "shared" folder of a development checkout, or an absolute /work/... path.
OUTSIDE = re.compile(r"parents\[(?:[3-9]|2\]\s*/\s*\"shared)|\.\./shared|[\"']/work/")


def test_no_test_reads_outside_the_repository() -> None:
    offenders = []
    for path in sorted(TESTS.rglob("*.py")):
        if path == Path(__file__).resolve():
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if OUTSIDE.search(line):
                offenders.append(f"{path.relative_to(TESTS)}:{number}: {line.strip()}")
    assert offenders == []
