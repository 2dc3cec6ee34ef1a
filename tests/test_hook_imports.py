"""The hook process imports only the standard library and memself: no numpy, torch,
sentence-transformers, httpx, mcp, click or jieba, for any host, event or configuration."""

from __future__ import annotations

import json
import os

import pytest

from memself.hosts import HOSTS
from memself.hosts.base import EventKind
from memself.paths import DataPaths
from tests.support.hookproc import hook_data, hook_runs, run_entry

__all__ = ["hook_data"]

FORBIDDEN = {
    "numpy",
    "torch",
    "sentence_transformers",
    "transformers",
    "httpx",
    "httpcore",
    "mcp",
    "click",
    "jieba",
    "scipy",
    "sklearn",
    "filelock",
    "anyio",
    "pydantic",
}


def imported_modules(stderr: bytes) -> set[str]:
    """Module names from ``-X importtime`` lines: ``import time: self | cumulative | name``."""
    names = set()
    for line in stderr.decode("utf-8", "replace").splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            names.add(line.rsplit("|", 1)[1].strip())
    return names


def configure_judge(paths: DataPaths) -> None:
    paths.config.write_text(
        json.dumps({"sideApiBase": "http://127.0.0.1:9/v1", "sideApiModel": "judge-test"}), encoding="utf-8"
    )
    key = {"apiKey": "sk-test-imports", "boundApiBase": "http://127.0.0.1:9/v1"}
    paths.side_secret.write_text(json.dumps(key), encoding="utf-8")
    os.chmod(paths.side_secret, 0o600)


@pytest.mark.parametrize("judge", [False, True], ids=["no-judge", "judge"])
@pytest.mark.parametrize("host", list(HOSTS))
def test_hook_imports_no_heavy_package(host: str, judge: bool, hook_data: DataPaths) -> None:
    if judge:
        configure_judge(hook_data)
    adapter = HOSTS[host]
    seen: set[str] = set()
    for kind in (EventKind.SESSION_START, EventKind.PROMPT_SUBMIT, EventKind.STOP):
        payload = {
            "hook_event_name": adapter.EVENT_NAMES[kind],
            "session_id": f"s-{host}",
            "conversation_id": f"s-{host}",
            "prompt": "以后回答都用中文，记住这一点",
            "cwd": "/tmp",
        }
        proc = run_entry(host, json.dumps(payload).encode(), python_flags=["-X", "importtime"])
        assert proc.rc == 0
        modules = imported_modules(proc.stderr)
        assert "memself.hook.run" in modules  # the measurement itself works
        seen |= modules
    heavy = sorted(m for m in seen if m.split(".")[0] in FORBIDDEN)
    assert heavy == [], heavy
    # Every run reached the core (no early exit that would make this test vacuous).
    runs = [r for r in hook_runs(hook_data) if r["host"] == host]
    assert [r["kind"] for r in runs] == ["session_start", "prompt_submit", "stop"]
    assert "memself.hook.core" in seen


def test_the_checker_sees_a_heavy_import(hook_data: DataPaths) -> None:
    """Guard against a vacuous test: an importtime listing does show a third-party package."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import click"], capture_output=True, timeout=60
    )
    assert "click" in imported_modules(done.stderr)
