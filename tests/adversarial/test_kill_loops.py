"""Writers killed with SIGKILL at random moments lose no memory, duplicate none and leave every file
readable once the next writer has moved a torn last line aside: at least 200 kills each for add,
appends under compaction, delete, restore, the judge's apply and rebuild-index.
The figures of each run are printed (``-s``) for the README."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# Kill loops: hundreds of killed writers, the full group.
pytestmark = pytest.mark.full

REPO_ROOT = Path(__file__).resolve().parents[2]
KILLS = 200


def _kill_loop(kind: str, seed: int, env: dict[str, str] | None = None) -> dict:
    result = subprocess.run(
        [sys.executable, "-m", "tests.adversarial.killloop", kind, str(KILLS), str(seed)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO_ROOT,
        env={**os.environ, **(env or {})},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    print(json.dumps(summary, ensure_ascii=False))
    return summary


def _assert_clean(summary: dict) -> None:
    assert summary["kills"] >= KILLS, summary
    assert (summary["lost"], summary["duplicated"], summary["unreadable"]) == (0, 0, 0), summary
    # A line torn by a kill inside its write is moved aside by the next writer, byte for byte.
    assert summary["torn_left"] == 0 and summary["torn_kept"] == summary["torn"], summary
    # What the killed writers left was cleared by the next writer or the daily maintenance.
    assert summary["leftovers"] == [], summary


@pytest.mark.parametrize("kind", ["add", "append-compact", "delete", "restore", "judge-apply"])
def test_kill_loop_store_writes(kind: str) -> None:
    _assert_clean(_kill_loop(kind, seed=20261102))


def test_kill_loop_rebuild_index(model_cache: Path) -> None:
    _assert_clean(_kill_loop("rebuild-index", seed=20261102, env={"MEMSELF_MODEL_CACHE": str(model_cache)}))
