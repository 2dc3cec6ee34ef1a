"""The hook entry as hosts run it: bad input of every kind, for every host, through the real
``python -I -S memself/hooks/entry.py`` process; and ``memself.hook.run``'s own rules, in process."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from memself.hook.command import hook_command_line
from memself.hook.inputs import Stdin, read_bounded
from memself.hook.run import RunContext, run
from memself.hosts import HOSTS
from memself.hosts.base import EventKind, HookEvent, HookReply
from memself.paths import DataPaths
from tests.support import foreign
from tests.support.hookproc import REPO_ROOT, HookProc, hook_data, hook_runs, load_payloads, run_entry
from tests.support.wheel_layout import install_copy

__all__ = ["hook_data"]  # the fixture, imported for pytest

CLAUDE = load_payloads("claude-code-2.1.332.json")
CODEBUDDY = load_payloads("codebuddy-code-2.117.0.json")
CURSOR = load_payloads("cursor-documented.json")
PROMPT_EVENT = {name: adapter.EVENT_NAMES[EventKind.PROMPT_SUBMIT] for name, adapter in HOSTS.items()}
WRONG_HOST = {
    "claude": CURSOR["beforeSubmitPrompt"],
    "cursor": CLAUDE["UserPromptSubmit"],
    "codebuddy": CURSOR["stop"],
    "workbuddy": CURSOR["sessionStart"],
}
TEN_MB = 10 * 1024 * 1024


def bad_inputs(host: str) -> dict[str, tuple[bytes, str | None]]:
    """name -> (stdin, expected note in the log line; None: a normal run, no note required)."""
    prompt = PROMPT_EVENT[host]
    huge = json.dumps(
        {
            "hook_event_name": prompt,
            "session_id": "s1",
            "conversation_id": "s1",
            "prompt": "长" * (TEN_MB // 3 + 1),
        },
        ensure_ascii=False,
    ).encode()
    assert len(huge) > TEN_MB
    return {
        "empty": (b"", "empty-stdin"),
        "whitespace": (b"  \n\t ", "empty-stdin"),
        "invalid-json": (b'{"hook_event_name": "Stop", "session_id": ', "bad-json"),
        "json-array": (json.dumps([{"hook_event_name": prompt}]).encode(), "not-object"),
        "json-string": (b'"UserPromptSubmit"', "not-object"),
        "ten-mb-prompt": (huge, "too-large"),
        "binary": (bytes(range(256)) * 64 + b"\xff\xfe\x00", "bad-json"),
        "deep-nesting": (b"[" * 200_000, "bad-json"),
        "missing-session-id": (
            json.dumps({"hook_event_name": prompt, "prompt": "以后回答都用中文"}).encode(),
            "no-session",
        ),
        "unknown-event": (
            json.dumps({"hook_event_name": "PreToolUse", "session_id": "s1", "tool_name": "Bash"}).encode(),
            "unknown-event",
        ),
        "wrong-host": (json.dumps(WRONG_HOST[host]).encode(), None),
        "lone-surrogate-and-bom": (
            b"\xef\xbb\xbf"
            + json.dumps(
                {
                    "hook_event_name": prompt,
                    "session_id": "s1",
                    "conversation_id": "s1",
                    "prompt": "记住\ud800这个",
                }
            ).encode(),
            None,
        ),
    }


CASES = [(host, case) for host in HOSTS for case in bad_inputs("claude")]


@pytest.mark.parametrize(("host", "case"), CASES, ids=[f"{h}-{c}" for h, c in CASES])
def test_bad_input_through_the_real_entry(host: str, case: str, hook_data: DataPaths) -> None:
    stdin, note = bad_inputs(host)[case]
    proc = run_entry(host, stdin)
    assert proc.rc == 0, proc.stderr[-500:]
    answer = proc.answer()  # empty, or exactly one JSON object on one line
    if answer is not None:
        assert '"continue"' not in proc.stdout.decode()
    budget = HOSTS[host].TIMEOUTS[EventKind.PROMPT_SUBMIT]
    assert proc.elapsed_s < budget, proc.elapsed_s
    runs = [r for r in hook_runs(hook_data) if r["host"] == host]
    assert len(runs) == 1, hook_runs(hook_data)
    assert runs[0].get("note") == note or (note is None and "error" not in runs[0])
    assert "error" not in runs[0], runs[0]
    if host == "cursor":
        assert answer is not None  # Cursor always gets JSON, {} for nothing


def test_unknown_agent_is_silent_and_logged(hook_data: DataPaths) -> None:
    entry = str(REPO_ROOT / "hooks" / "entry.py")
    for argv in (["--agent", "vscode"], ["--agent=VSCODE"]):
        done = subprocess.run(
            [sys.executable, "-I", "-S", entry, *argv],
            input=json.dumps(CLAUDE["UserPromptSubmit"]).encode(),
            capture_output=True,
            timeout=30,
        )
        assert (done.returncode, done.stdout) == (0, b"")
    notes = [r.get("note") for r in hook_runs(hook_data)]
    assert notes == ["unknown-agent"] * 2


def test_missing_agent_is_guessed_and_logged(hook_data: DataPaths) -> None:
    """As the original: no ``--agent`` and a PascalCase event name means CodeBuddy."""
    entry = str(REPO_ROOT / "hooks" / "entry.py")
    for argv in ([], ["--agent"]):
        done = subprocess.run(
            [sys.executable, "-I", "-S", entry, *argv],
            input=json.dumps(CLAUDE["UserPromptSubmit"]).encode(),
            capture_output=True,
            timeout=30,
        )
        assert done.returncode == 0
    runs = hook_runs(hook_data)
    assert [(r["host"], r.get("note")) for r in runs] == [("codebuddy", "guessed-host")] * 2
    assert all("error" not in r for r in runs)


def test_the_entry_survives_a_missing_package(tmp_path: Path) -> None:
    """A hook left registered after the package is gone must still exit 0 silently."""
    lone = tmp_path / "hooks" / "entry.py"
    lone.parent.mkdir()
    shutil.copy(REPO_ROOT / "hooks" / "entry.py", lone)
    done = subprocess.run(
        [sys.executable, "-I", "-S", str(lone), "--agent", "claude"],
        input=b"{}",
        capture_output=True,
        timeout=30,
    )
    assert (done.returncode, done.stdout) == (0, b"")
    assert b"ModuleNotFoundError" in done.stderr


# --- memself.hook.run in process: the core is injected -----------------------------------------

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=timezone.utc)


def run_inproc(host: str, payload: object, handler, **kwargs) -> tuple[bytes, bool]:
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    out = io.BytesIO()
    answered = run(
        Stdin(raw),
        RunContext(host, core=handler, stdout=out, env=kwargs.pop("env", {}), now=NOW, **kwargs),
    )
    return out.getvalue(), answered


def test_run_passes_the_parsed_event_and_renders(isolated_home: Path) -> None:
    seen: list[tuple[HookEvent, datetime, DataPaths]] = []

    def handler(event: HookEvent, now: datetime, paths: DataPaths) -> HookReply:
        seen.append((event, now, paths))
        return HookReply(context="规则：回答用中文", user_message="召回")

    out, answered = run_inproc("claude", CLAUDE["UserPromptSubmit"], handler)
    assert answered
    assert json.loads(out) == {
        "hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": "规则：回答用中文"},
        "systemMessage": "召回",
    }
    assert out.endswith(b"\n") and "规则".encode() in out  # UTF-8, not \u escapes
    event, now, paths = seen[0]
    assert (event.prompt, event.turn_id, now) == (
        "please run the tool",
        CLAUDE["UserPromptSubmit"]["prompt_id"],
        NOW,
    )
    assert paths == DataPaths.default()


@pytest.mark.parametrize("host", list(HOSTS))
def test_run_answers_nothing_when_the_core_raises(host: str, isolated_home: Path) -> None:
    def handler(event: HookEvent, now: datetime, paths: DataPaths) -> HookReply:
        raise RuntimeError("内部细节 sk-secret-should-not-be-logged")

    out, answered = run_inproc(
        host,
        {"hook_event_name": PROMPT_EVENT[host], "session_id": "s", "conversation_id": "s", "prompt": "hello"},
        handler,
    )
    assert answered
    assert out == (b"{}\n" if host == "cursor" else b"")
    [run] = hook_runs(DataPaths.default())
    assert run["error"].startswith("RuntimeError at ")
    log = DataPaths.default().log_file.read_text(encoding="utf-8")
    assert "sk-secret" not in log and "hello" not in log  # no messages, no prompts in the log


def test_run_skips_the_core_for_unknown_events(isolated_home: Path) -> None:
    calls = []
    out, _ = run_inproc("claude", CLAUDE["PreToolUse"], lambda *a: calls.append(a))
    assert (out, calls) == (b"", [])


def test_run_steps_aside_under_cursor(isolated_home: Path) -> None:
    (isolated_home / ".cursor").mkdir()
    (isolated_home / ".cursor" / "hooks.json").write_text(
        json.dumps({"version": 1, "hooks": {"stop": [{"command": hook_command_line("cursor")}]}})
    )
    calls = []

    def handler(*args: object) -> HookReply:
        calls.append(args)
        return HookReply(context="x")

    out, _ = run_inproc(
        "claude", CLAUDE["UserPromptSubmit"], handler, env={"CURSOR_VERSION": "3.20.17"}, home=isolated_home
    )
    assert (out, calls) == (b"", [])
    out, _ = run_inproc("claude", CLAUDE["UserPromptSubmit"], handler, env={}, home=isolated_home)
    assert out and len(calls) == 1
    # Cursor's own registration is never the one that steps aside.
    out, _ = run_inproc(
        "cursor", CURSOR["beforeSubmitPrompt"], handler, env={"CURSOR_VERSION": "3.20.17"}, home=isolated_home
    )
    assert json.loads(out) == {"additional_context": "x"}


def test_fixed_now_for_reproducible_runs(isolated_home: Path) -> None:
    seen = []
    run(
        Stdin(json.dumps(CLAUDE["SessionStart"]).encode()),
        RunContext(
            "claude",
            core=lambda e, now, p: seen.append(now) or HookReply(),
            env={"MEMSELF_NOW": "2026-01-02T03:04:05+08:00"},
            stdout=io.BytesIO(),
        ),
    )
    assert (
        seen == [datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc).replace(tzinfo=seen[0].tzinfo)]
        and seen[0].utcoffset().total_seconds() == 8 * 3600
    )
    run(
        Stdin(b"{}"),
        RunContext(
            "claude",
            core=lambda e, now, p: HookReply(),
            env={"MEMSELF_NOW": "not a time"},
            stdout=io.BytesIO(),
        ),
    )


def test_read_bounded_drains_what_it_drops() -> None:
    stream = io.BytesIO(b"x" * 5000)
    got = read_bounded(stream, 1000, 1.0)
    assert (len(got.raw), got.truncated, got.timed_out) == (1000, True, False)
    assert stream.read() == b""  # the writer is never left blocked on a full pipe


def test_read_bounded_does_not_wait_forever_on_an_open_pipe() -> None:
    read_fd, write_fd = os.pipe()
    try:
        os.write(write_fd, b'{"a": 1}')
        started = time.monotonic()
        with os.fdopen(read_fd, "rb", closefd=True) as reader:
            got = read_bounded(reader, 1000, 0.3)
        assert (got.raw, got.truncated, got.timed_out) == (b'{"a": 1}', False, True)
        assert time.monotonic() - started < 2
    finally:
        os.close(write_fd)


def test_read_bounded_waits_for_a_payload_written_late() -> None:
    """A host that writes after the hook started: the first read finds nothing, the wait takes
    the payload, and the pipe is left blocking as it was found."""
    read_fd, write_fd = os.pipe()
    writer = threading.Timer(0.2, lambda: (os.write(write_fd, b'{"late": 1}'), os.close(write_fd)))
    writer.start()
    try:
        with os.fdopen(read_fd, "rb", closefd=True) as reader:
            got = read_bounded(reader, 1000, 3.0)
            assert os.get_blocking(reader.fileno())
        assert (got.raw, got.truncated, got.timed_out) == (b'{"late": 1}', False, False)
    finally:
        writer.join()


def _stuck_cursor_prompt(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """A Cursor prompt through the hook harness whose core sleeps 30 s: only a deadline or the
    watchdog ends it."""
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps({"prompt_submit": {"sleep": 30, "context": "late"}}))
    harness = str(REPO_ROOT / "tests" / "support" / "hook_harness.py")
    return subprocess.run(
        [sys.executable, "-I", "-S", harness, "--agent", "cursor", "--replies", str(replies), *args],
        input=json.dumps(CURSOR["beforeSubmitPrompt"]).encode(),
        capture_output=True,
        timeout=30,
        env=env,
    )


@pytest.mark.parametrize(
    ("flags", "note"),
    [((), "deadline"), (("--no-deadline",), "watchdog")],
    ids=["deadline", "watchdog-thread"],
)
def test_stuck_core_answers_before_the_host_kills_the_hook(
    flags: tuple[str, ...], note: str, tmp_path: Path, hook_data: DataPaths
) -> None:
    """A stuck core: the hook still answers "nothing" at 80 % of the host's timeout, by its hard
    deadline, or by ``memself.hook.run``'s watchdog thread where no deadline could be armed."""
    started = time.monotonic()
    done = _stuck_cursor_prompt(tmp_path, *flags)
    elapsed = time.monotonic() - started
    proc = HookProc(done.returncode, done.stdout, done.stderr, elapsed)
    assert proc.rc == 0 and proc.answer() == {}
    # Well before the core's 30 s sleep ends: the deadline cut it. That the answer also beats
    # Cursor's 5 s on a starved machine is the full group's (tests/adversarial/test_hook_deadline.py).
    assert 3.5 < elapsed < 15.0, elapsed
    # Windows has no alarm signal: there the watchdog thread answers in either case.
    assert [r.get("note") for r in hook_runs(hook_data)] == ["watchdog" if foreign.active() else note]


def test_without_an_alarm_the_watchdog_counts_from_the_registered_timeout(
    tmp_path: Path, hook_data: DataPaths
) -> None:
    """Where no alarm exists (Windows, here the foreign-platform mode), the run's watchdog takes
    the timeout the registered command carries, as the alarm would, not the host's default: a
    command registered with 8 s is not cut at 80 % of Cursor's 5 s."""
    started = time.monotonic()
    done = _stuck_cursor_prompt(
        tmp_path, "--timeout", "8", env={**os.environ, "MEMSELF_FOREIGN_PLATFORM": "1"}
    )
    elapsed = time.monotonic() - started
    assert done.returncode == 0 and json.loads(done.stdout) == {}
    assert 6.0 < elapsed < 20.0, elapsed
    assert [r.get("note") for r in hook_runs(hook_data)] == ["watchdog"]


@pytest.mark.parametrize(
    ("argv", "answer", "note"),
    [
        (["--agent", "cursor"], {}, None),
        (["--agent", "vscode"], None, "unknown-agent"),
        ([], {}, "guessed-host"),  # a camelCase event: Cursor, as the original guessed
    ],
)
def test_slow_cli_entry_is_the_same_function(
    argv: list[str], answer: dict | None, note: str | None, hook_data: DataPaths
) -> None:
    """``memself hook`` never exits non-zero either (click usage errors would exit 2)."""
    done = subprocess.run(
        [sys.executable, "-m", "memself", "hook", *argv],
        input=json.dumps(CURSOR["stop-2"]).encode(),
        capture_output=True,
        timeout=60,
    )
    proc = HookProc(done.returncode, done.stdout, done.stderr, 0.0)
    assert proc.rc == 0 and proc.answer() == answer, done.stderr[-500:]
    [run] = hook_runs(hook_data)
    assert run.get("note") == note


def test_entry_finds_the_package_in_a_wheel_layout(tmp_path: Path, hook_data: DataPaths) -> None:
    """Installed from a wheel the entry is <site>/memself/_shipped/hooks/entry.py: the bootstrap
    must import from that site dir, not the source tree."""
    site = tmp_path / "site"
    install_copy(site)
    marker = "# wheel-copy\n"
    cursor_mod = site / "memself" / "hosts" / "cursor.py"
    cursor_mod.write_text(
        cursor_mod.read_text(encoding="utf-8").replace(
            "ASK_TOOL = FACTS.ask_tool", "ASK_TOOL = FACTS.ask_tool\nWHEEL_COPY = True"
        )
        + marker,
        encoding="utf-8",
    )
    entry = site / "memself" / "_shipped" / "hooks" / "entry.py"
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import runpy, sys\n"
        f"runpy.run_path({str(entry)!r}, run_name='x')['_bootstrap']()\n"
        "import memself, memself.hosts.cursor as c\n"
        "print(memself.__file__, c.__file__, getattr(c, 'WHEEL_COPY', False))\n"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", str(probe)], capture_output=True, timeout=30, text=True
    )
    assert done.returncode == 0, done.stderr
    memself_file, cursor_file, wheel_copy = done.stdout.split()
    assert memself_file.startswith(str(site)) and cursor_file.startswith(str(site))
    assert wheel_copy == "True"
    done = subprocess.run(
        [sys.executable, "-I", "-S", str(entry), "--agent", "cursor"],
        input=json.dumps(CURSOR["stop-2"]).encode(),
        capture_output=True,
        timeout=30,
    )
    assert (done.returncode, done.stdout) == (0, b"{}\n"), done.stderr
    assert [r["kind"] for r in hook_runs(hook_data)] == ["stop"]
