"""A hook command without ``--agent`` (hand-written, or registered by hand from an old README).

The original guessed the host from the event name's case: Claude-style PascalCase names
(``SessionStart``, ``UserPromptSubmit``, ``Stop``) meant CodeBuddy, anything else Cursor. Answering
nothing instead silently switches memory off for that user. The guess is logged, so a wrong one
can be found.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile

import pytest

from memself.hook.command import hook_command
from memself.paths import DataPaths
from tests.support.helpers import make_store, record, write_records
from tests.support.hookproc import hook_data, hook_runs

__all__ = ["hook_data"]

RULE = "回答一律使用中文，代码注释也用中文"


def _run_without_agent(payload: dict) -> dict | None:
    argv = hook_command("cursor")
    assert argv[-2:] == ["--agent", "cursor"]
    proc = subprocess.run(
        argv[:-2],
        input=json.dumps(payload, ensure_ascii=False).encode("utf-8"),
        capture_output=True,
        timeout=30,
        env=dict(os.environ),
        cwd=tempfile.gettempdir(),
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout) if proc.stdout.strip() else None


@pytest.mark.parametrize(
    ("event", "host"),
    [("SessionStart", "codebuddy"), ("sessionStart", "cursor")],
)
def test_missing_agent_is_guessed_from_the_event_case_and_logged(
    hook_data: DataPaths, event: str, host: str
) -> None:
    write_records(make_store(hook_data.root), "rule", [record("r1", RULE, 0.8)])
    answer = _run_without_agent({"hook_event_name": event, "session_id": "s-1", "conversation_id": "s-1"})
    assert answer is not None, "the hook answered nothing: memory is off for this user"
    if host == "cursor":
        assert RULE in answer["additional_context"]
    else:
        assert RULE in answer["hookSpecificOutput"]["additionalContext"]
        assert answer["hookSpecificOutput"]["hookEventName"] == event
    run = hook_runs(hook_data)[-1]
    assert run["host"] == host
    assert run["note"] == "guessed-host"


def test_an_unknown_agent_is_still_not_guessed(hook_data: DataPaths) -> None:
    """A misspelt ``--agent`` is a registration error to see in the log, not something to paper over."""
    argv = [*hook_command("cursor")[:-1], "cursr"]
    proc = subprocess.run(
        argv,
        input=b'{"hook_event_name":"sessionStart","conversation_id":"c"}',
        capture_output=True,
        timeout=30,
        cwd=tempfile.gettempdir(),
    )
    assert proc.returncode == 0 and proc.stdout == b""
    assert hook_runs(hook_data)[-1]["note"] == "unknown-agent"
