"""Hook commands registered before the entry moved out of the package still run
``<root>/memself/hooks/entry.py``.

Until ``memself setup`` rewrites them, that path must answer as the entry does: a missing file
would make Python exit 2, which Claude Code and CodeBuddy read as "block this prompt".
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from memself.paths import DataPaths
from tests.support.hookproc import REPO_ROOT, hook_data, hook_runs, load_payloads

__all__ = ["hook_data"]  # the fixture, imported for pytest

OLD_ENTRY = REPO_ROOT / "memself" / "hooks" / "entry.py"
CLAUDE = load_payloads("claude-code-2.1.332.json")
CURSOR = load_payloads("cursor-documented.json")


def run_old(entry: Path, argv: list[str], stdin: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-I", "-S", str(entry), *argv],
        input=stdin,
        capture_output=True,
        timeout=60,
        cwd=tempfile.gettempdir(),
    )


def test_a_hook_registered_at_the_old_path_still_runs(hook_data: DataPaths) -> None:
    done = run_old(OLD_ENTRY, ["--agent", "cursor"], json.dumps(CURSOR["stop-2"]).encode())
    assert (done.returncode, done.stdout) == (0, b"{}\n"), done.stderr
    done = run_old(OLD_ENTRY, ["--agent", "claude"], json.dumps(CLAUDE["UserPromptSubmit"]).encode())
    assert done.returncode == 0, done.stderr
    # The arguments reach the entry unchanged: an unknown host is refused by the entry itself.
    done = run_old(OLD_ENTRY, ["--agent", "vscode"], json.dumps(CLAUDE["Stop"]).encode())
    assert (done.returncode, done.stdout) == (0, b""), done.stderr
    runs = hook_runs(hook_data)
    assert [(r["host"], r.get("kind")) for r in runs[:2]] == [("cursor", "stop"), ("claude", "prompt_submit")]
    assert runs[2].get("note") == "unknown-agent"
    assert len(runs) == 3


def test_the_old_path_without_the_package_exits_0(tmp_path: Path) -> None:
    lone = tmp_path / "memself" / "hooks" / "entry.py"
    lone.parent.mkdir(parents=True)
    shutil.copy(OLD_ENTRY, lone)
    done = run_old(lone, ["--agent", "claude"], b"{}")
    assert (done.returncode, done.stdout) == (0, b"")
    assert b"memself hook: FileNotFoundError" in done.stderr
