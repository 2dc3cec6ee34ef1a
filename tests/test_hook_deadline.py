"""The hook's hard deadline: a share of the registered timeout its command line carries, the
"no answer" output against the adapters, the fallback for commands of older installs, and that
nothing is armed in-process."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time

import pytest

from memself.hook import deadline
from memself.hook.command import hook_command, hook_command_agent, hook_command_line
from memself.hook.inputs import Stdin
from memself.hook.run import RunContext, run
from memself.hosts import HOSTS
from memself.hosts.base import EventKind, HookReply
from tests.support import foreign

# The alarm exists on POSIX only; on Windows the watchdog thread stands in (test_hook_entry).
ALARM_ONLY = pytest.mark.skipif(foreign.active(), reason="no alarm signal on Windows")


@pytest.mark.parametrize("host", list(HOSTS))
def test_deadlines_are_a_share_of_the_registered_timeouts(host: str) -> None:
    adapter = HOSTS[host]
    for timeout in adapter.TIMEOUTS.values():
        seconds = deadline.deadline_for(timeout)
        assert seconds == pytest.approx(deadline.SHARE * timeout - deadline.EXIT_MARGIN_S)
        # Room for the reserves a wait leaves for what follows it.
        assert seconds > 2 * deadline.LOCAL_RESERVE_S
        # Without the registered timeout, no hook may be given longer than the host allows.
        assert deadline.fallback_s() <= seconds
    assert deadline.deadline_for(HOSTS["cursor"].TIMEOUTS[EventKind.PROMPT_SUBMIT]) <= 3.8


def test_the_fallback_is_the_shortest_registered_deadline() -> None:
    shortest = min(t for adapter in HOSTS.values() for t in adapter.TIMEOUTS.values())
    assert deadline.deadline_for(None) == deadline.fallback_s()
    assert deadline.fallback_s() == pytest.approx(deadline.deadline_for(shortest))


def printed_for_nothing(host: str, kind: EventKind) -> bytes:
    """What a hook run prints when the core answers nothing for ``host``'s ``kind`` event."""
    payload = {"hook_event_name": HOSTS[host].EVENT_NAMES[kind], "session_id": "s", "conversation_id": "s"}
    out = io.BytesIO()
    context = RunContext(host, core=lambda e, n, p: HookReply(), env={}, stdout=out)
    assert run(Stdin(json.dumps(payload).encode()), context)
    return out.getvalue()


@pytest.mark.parametrize("host", list(HOSTS))
def test_registered_commands_carry_the_timeout_and_the_empty_reply(host: str, isolated_home) -> None:
    """Each event's registered command tells the hook its timeout and what "no answer" looks
    like for the host, exactly as the local run would print it."""
    for kind, timeout in HOSTS[host].TIMEOUTS.items():
        argv = hook_command(host, kind)
        assert deadline._arg(argv, deadline.TIMEOUT_ARG) == str(timeout)
        reply = deadline._arg(argv, deadline.EMPTY_REPLY_ARG)
        assert (b"" if reply is None else reply.encode() + b"\n") == printed_for_nothing(host, kind)
        # Still recognised as ours (setup replaces it), and for the right host.
        assert hook_command_agent(hook_command_line(host, kind)) == host


@pytest.mark.parametrize("host", list(HOSTS))
def test_an_older_commands_empty_reply_is_the_adapters(host: str, isolated_home) -> None:
    """A command of an older install carries no empty reply: the adapter gives it, at arming."""
    for kind in HOSTS[host].TIMEOUTS:
        assert deadline._adapter_empty_reply(host) == printed_for_nothing(host, kind)
    assert deadline._adapter_empty_reply("vscode") == b""


ARM_PROBE = """
import json, sys
from memself.hook import deadline
steps = json.loads(sys.argv[1])
out = []
for step in steps:
    if step[0] == "arm":
        deadline.arm(step[1], step[2])
    else:
        deadline.learn(step[1])
    out.append([round(deadline._state.deadline, 3), deadline._state.empty_reply.decode()])
import _signal
_signal.setitimer(_signal.ITIMER_REAL, 0)
print(json.dumps(out))
"""


def arm_steps(*steps: list) -> list:
    """Run arm/learn steps in a process of their own (an alarm must not be armed in pytest)."""
    done = subprocess.run(
        [sys.executable, "-c", ARM_PROBE, json.dumps(steps)], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@ALARM_ONLY
def test_the_command_line_arms_and_stands() -> None:
    registered = ["--agent", "cursor", "--timeout", "5", "--empty-reply", "{}"]
    assert arm_steps(["arm", "cursor", registered], ["learn", 20]) == [[3.8, "{}\n"], [3.8, "{}\n"]]
    spelled = ["--agent=claude", "--timeout=20"]
    assert arm_steps(["arm", "claude", spelled], ["learn", 10]) == [[15.8, ""], [15.8, ""]]


@ALARM_ONLY
@pytest.mark.parametrize(
    "argv",
    [
        ["--agent", "claude"],  # registered by an older install
        ["--agent", "claude", "--timeout"],
        ["--agent", "claude", "--timeout", "ten"],
        ["--agent", "claude", "--timeout", "-5"],
        ["--agent", "claude", "--timeout=0"],
        ["--agent", "claude", "--timeout", "inf"],
    ],
)
def test_without_a_timeout_the_fallback_stands_until_the_adapter_is_known(argv: list[str]) -> None:
    assert arm_steps(["arm", "claude", argv], ["learn", 10], ["learn", 20]) == [
        [deadline.fallback_s(), ""],
        [7.8, ""],
        [7.8, ""],
    ]
    cursor = ["--agent", "cursor", *argv[2:]]
    assert arm_steps(["arm", "cursor", cursor])[0] == [deadline.fallback_s(), "{}\n"]


def test_process_age_counts_the_interpreter_start() -> None:
    """A process that sleeps before asking still reports its whole age."""
    code = "import time; time.sleep(0.5)\nfrom memself.hook.deadline import process_age\nprint(process_age())"
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    elapsed = time.monotonic() - started
    age = float(done.stdout)
    assert 0.5 <= age <= elapsed + 0.05, (age, elapsed)


def test_nothing_is_armed_in_process() -> None:
    """``run`` answers hook after hook inside the engine: no deadline, no claimed answer."""
    assert not deadline.armed() and deadline.remaining() is None
    assert deadline.budget(2.0, 1.0) == 2.0
    payload = json.dumps(
        {"hook_event_name": "beforeSubmitPrompt", "conversation_id": "s", "prompt": "hello"}
    ).encode()
    for _ in range(3):
        out = io.BytesIO()
        context = RunContext(
            "cursor", core=lambda e, n, p: HookReply(context="x"), env={}, stdout=out, in_engine=True
        )
        assert run(Stdin(payload), context)
        assert out.getvalue() == b'{"additional_context":"x"}\n'
