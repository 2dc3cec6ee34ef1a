"""The suite's own guard, as ./scripts/test.sh runs it (pytest-xdist workers): a test that touches
the home directory it started with fails, in a worker as in one process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent

_TOUCHES_HOME = """
import os

HOME = os.path.expanduser("~")  # the real home, as the guard sees it, before any fixture runs


def test_reads_a_host_file_in_the_real_home():
    try:
        open(os.path.join(HOME, ".claude.json")).close()
    except OSError:
        pass


def test_stays_in_its_fake_home():
    assert os.path.expanduser("~") != HOME
"""


def test_touching_the_real_home_fails_the_test_in_a_worker(tmp_path: Path) -> None:
    # The inner run's "real" home is this test's fake one: the true home is never touched.
    (tmp_path / "test_touches_home.py").write_text(_TOUCHES_HOME, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "tests.conftest",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(tmp_path),
            "-c",
            os.devnull,
            "-n",
            "2",
            str(tmp_path / "test_touches_home.py"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    # The guard fails the test at its teardown: an error, the other test untouched.
    assert "2 passed, 1 error" in done.stdout, done.stdout[-3000:]
    assert "ERROR test_touches_home.py::test_reads_a_host_file_in_the_real_home" in done.stdout
    assert "test touched the real home directory: read " in done.stdout
