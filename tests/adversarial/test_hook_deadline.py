"""A loaded machine: the hook process starts late (starved of CPU, here a real SIGSTOP right after
the spawn), the engine does not answer, the core is stuck, or Stop's judge never returns. The hook
still answers within its hard deadline, counted from its own process start: 80 % of the host's
timeout (less a margin for the exit), within 4 s for Cursor's 5 s prompt hook."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memself.config import set_config_value
from memself.engine.client import EngineClient, ensure_started
from memself.hosts import HOSTS
from memself.hosts.base import EventKind
from memself.judge import jobs
from memself.paths import DataPaths
from memself.text import messages as texts
from tests.support.hookproc import REPO_ROOT, HookProc, hook_data, hook_runs, load_payloads
from tests.support.judge_helpers import configure, proposal, ready
from tests.support.judge_server import Reply, running_judge
from tests.test_hook_imports import imported_modules
from tests.test_judge_e2e_hook import prompt_hook

# Hooks under CPU starvation and hung judges, at their real deadlines: the full group.
pytestmark = pytest.mark.full

__all__ = ["hook_data"]

CURSOR = load_payloads("cursor-documented.json")
# Time a hook may take beyond its deadline to leave: exit, and the test's own spawn and reap.
EXIT_SLACK_S = 0.6
SHARE = 0.8  # of the host's registered timeout


def deadline_for(host: str, kind: EventKind) -> float:
    """The longest a hook may take, as the host sees it."""
    return SHARE * HOSTS[host].TIMEOUTS[kind]


def starved(argv: list[str], stdin: bytes, stop_s: float, timeout: float = 60) -> HookProc:
    """Run ``argv`` stopped for ``stop_s`` right after the spawn: what CPU starvation does to a
    hook's start, with a real signal."""
    started = time.monotonic()
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd="/tmp"
    )
    os.kill(proc.pid, signal.SIGSTOP)
    time.sleep(stop_s)
    os.kill(proc.pid, signal.SIGCONT)
    out, err = proc.communicate(stdin, timeout=timeout)
    return HookProc(proc.returncode, out, err, time.monotonic() - started)


def entry(host: str) -> list[str]:
    return [sys.executable, "-I", "-S", str(REPO_ROOT / "hooks" / "entry.py"), "--agent", host]


def test_starved_cursor_prompt_with_a_stuck_engine_answers_within_4s(hook_data: DataPaths) -> None:
    """The engine holds the socket but never answers (SIGSTOPped): the fast path gives it only
    what the deadline leaves, and the hook answers in its own process before 4 s."""
    ensure_started(hook_data)
    deadline = time.monotonic() + 20
    info: dict = {}
    while time.monotonic() < deadline and not info.get("ready"):
        try:
            info = EngineClient(hook_data).ping(0.5)
        except Exception:
            time.sleep(0.1)
    assert info.get("ready"), info
    os.kill(info["pid"], signal.SIGSTOP)
    try:
        proc = starved(entry("cursor"), json.dumps(CURSOR["beforeSubmitPrompt"]).encode(), 2.5)
    finally:
        os.kill(info["pid"], signal.SIGCONT)
    assert proc.rc == 0
    assert deadline_for("cursor", EventKind.PROMPT_SUBMIT) == 4.0
    assert proc.elapsed_s < 4.0 + EXIT_SLACK_S, proc.elapsed_s
    # Answered in the hook process, without recall: the reminder (or, on a machine slower still,
    # Cursor's "nothing"), never a half-written or missing answer.
    assert proc.answer() in ({"additional_context": texts.DEPOSITION_OFF}, {})


@pytest.mark.parametrize("host", list(HOSTS))
def test_starved_stuck_core_answers_nothing_at_the_deadline(
    host: str, tmp_path: Path, hook_data: DataPaths
) -> None:
    """A core that never returns, in a process that started 2 s late: the deadline still counts
    from the process start, so the host gets its "no answer" at 80 % of its prompt timeout."""
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps({"prompt_submit": {"sleep": 60, "context": "late"}}))
    argv = [
        sys.executable,
        "-I",
        "-S",
        str(REPO_ROOT / "tests" / "support" / "hook_harness.py"),
        "--agent",
        host,
        "--replies",
        str(replies),
    ]
    payload = {
        "hook_event_name": HOSTS[host].EVENT_NAMES[EventKind.PROMPT_SUBMIT],
        "session_id": "s",
        "conversation_id": "s",
        "prompt": "以后回答都用中文",
    }
    proc = starved(argv, json.dumps(payload).encode(), 2.0)
    limit = deadline_for(host, EventKind.PROMPT_SUBMIT)
    assert proc.rc == 0
    assert limit - 0.6 < proc.elapsed_s < limit + EXIT_SLACK_S, proc.elapsed_s
    assert limit < HOSTS[host].TIMEOUTS[EventKind.PROMPT_SUBMIT]
    assert proc.answer() == ({} if host == "cursor" else None)
    assert [r.get("note") for r in hook_runs(hook_data)] == ["deadline"]


@pytest.mark.parametrize(
    ("host", "registered", "printed"),
    [
        ("cursor", ["--timeout", "2", "--empty-reply", "{}"], b"{}\n"),
        ("claude", ["--timeout", "2"], b""),
        ("cursor", [], b"{}\n"),  # an older install's command: the adapter is asked at expiry
    ],
    ids=["cursor", "claude", "cursor-older-install"],
)
def test_a_deadline_passed_before_the_hook_started_answers_nothing_at_once(
    host: str, registered: list[str], printed: bytes, hook_data: DataPaths
) -> None:
    """Starved past its whole deadline before running a line: the hook answers the host's "no
    answer" as soon as it arms, from its command line without importing any adapter, or, for
    a command of an older install, from the adapter."""
    argv = [*entry(host), *registered]
    argv[1:1] = ["-X", "importtime"]
    stop_s = 4.5 if not registered else 2.0  # past the fallback, or past 80 % of 2 s
    payload = {"hook_event_name": HOSTS[host].EVENT_NAMES[EventKind.PROMPT_SUBMIT], "session_id": "s"}
    proc = starved(argv, json.dumps(payload).encode(), stop_s)
    assert proc.rc == 0
    assert proc.stdout == printed
    adapters = {m for m in imported_modules(proc.stderr) if m.startswith("memself.hosts")}
    assert bool(adapters) is not bool(registered), adapters
    assert "memself.hook.run" not in imported_modules(proc.stderr)  # ended before any local run
    assert hook_runs(hook_data) == []


# The hook process up to the alarm, as the entry runs it (``-I -S``, the package found by path):
# an older install's command (no timeout, no "no answer" output) with its deadline already
# passed, the alarm pending but blocked until the main thread starts importing ``TRIGGER``. Then
# what the hook does when it gives up on the engine: import the local run.
MID_IMPORT = """
import sys
root = sys.argv[1]
sys.path.insert(0, root)
import memself
memself.__path__.append(root)
import _signal, time
from memself.hook import deadline

TRIGGER = sys.argv[2]
_signal.pthread_sigmask(_signal.SIG_BLOCK, {_signal.SIGALRM})
deadline.FALLBACK_S = 0.0
deadline.arm("cursor", ["--agent", "cursor"])
time.sleep(0.05)


class Unblock:
    def find_spec(self, name, path=None, target=None):
        if name == TRIGGER:
            _signal.pthread_sigmask(_signal.SIG_UNBLOCK, {_signal.SIGALRM})
        return None


sys.meta_path.insert(0, Unblock())
try:
    import memself.hook.run
    _signal.pthread_sigmask(_signal.SIG_UNBLOCK, {_signal.SIGALRM})
    time.sleep(5)
except BaseException as exc:
    sys.stderr.write(f"escaped: {type(exc).__name__}: {exc}\\n")
sys.stdout.flush()
"""


@pytest.mark.parametrize("trigger", ["json.decoder", "memself.hosts.claude", "memself.hosts.base", "enum"])
def test_a_deadline_passing_mid_import_answers_the_hosts_nothing(trigger: str) -> None:
    """The alarm's handler runs between two bytecodes of whatever the main thread is doing, also
    half-way through an import. The host's "no answer" output must not need an import then: the
    modules it would need may be exactly the half-initialised ones."""
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", MID_IMPORT, str(REPO_ROOT), trigger],
        capture_output=True,
        timeout=60,
        cwd="/tmp",
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert done.stdout == b"{}\n", done.stderr.decode()[-2000:]
    assert b"escaped" not in done.stderr


def test_stop_waiting_for_a_hung_judge_answers_before_its_deadline(hook_data: DataPaths) -> None:
    """sideWaitMs as long as the host's whole Stop timeout (its highest value) and a judge that
    never returns: Stop stops waiting in time to show what is ready, instead of being cut off
    with nothing."""
    paths = hook_data
    session = "stop-deadline"
    with running_judge() as judge:
        configure(paths, judge.url, confirm=True)
        set_config_value(paths, "sideWaitMs", "20000")
        sid = ready(
            paths,
            "记住：以后回答都用中文",
            proposal("回答问题时使用中文"),
            session=session,
            turn="t-ready",
            at=_now(),
        )
        judge.script(Reply("hang"))
        prompt_hook("claude", session, "记住：提交信息一律用英文写", "t-hung")
        waited = time.monotonic() + 20
        while time.monotonic() < waited and not judge.requests:
            time.sleep(0.05)
        assert judge.requests, "the judge never called the endpoint"
        running = [j for j in jobs.list_jobs(paths, _now()) if j["status"] == jobs.RUNNING]
        assert len(running) == 1
        stop = {"hook_event_name": "Stop", "session_id": session, "stop_hook_active": False, "cwd": "/tmp"}
        proc = starved(entry("claude"), json.dumps(stop).encode(), 1.0)
    limit = deadline_for("claude", EventKind.STOP)
    assert proc.rc == 0
    assert proc.elapsed_s < limit + EXIT_SLACK_S, proc.elapsed_s
    answer = proc.answer()
    assert answer is not None and answer["decision"] == "block", proc.stdout[:300]
    assert "回答问题时使用中文" in answer["reason"] and sid in answer["reason"]


def _now():
    from datetime import datetime, timezone

    return datetime.now(timezone.utc)
