"""The e2e group's prerequisites: Node.js >= 20 and npm, which the real-client tests install from.

Also keeps ``./scripts/test.sh -m e2e`` from ever selecting zero tests (pytest exit 5 fails CI).
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

pytestmark = pytest.mark.e2e


def _version(cmd: str) -> tuple[int, ...]:
    path = shutil.which(cmd)
    assert path, f"{cmd} not found on PATH; the e2e group needs Node.js >= 20 and npm"
    out = subprocess.run(
        [path, "--version"], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, check=True
    ).stdout.strip()
    match = re.search(r"(\d+)\.(\d+)\.(\d+)", out)
    assert match, out
    return tuple(int(x) for x in match.groups())


def test_node_is_at_least_20() -> None:
    assert _version("node") >= (20, 0, 0)


def test_npm_runs() -> None:
    assert _version("npm") >= (8, 0, 0)
