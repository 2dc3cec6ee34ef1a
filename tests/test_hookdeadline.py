"""The hook's hard deadline: its table against the hosts' registered timeouts, the "no answer"
output against the adapters, the look at a raw payload, and that nothing is armed in-process."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time

import pytest

from memself import hookdeadline
from memself.hook.inputs import Stdin
from memself.hook.run import RunContext, run
from memself.hosts import HOSTS
from memself.hosts.base import EventKind, HookEvent, HookReply

KINDS = (
    EventKind.SESSION_START,
    EventKind.PROMPT_SUBMIT,
    EventKind.STOP,
    EventKind.SUBAGENT_STOP,
    EventKind.UNKNOWN,
)


@pytest.mark.parametrize("host", list(HOSTS))
def test_deadlines_are_a_share_of_the_registered_timeouts(host: str) -> None:
    adapter = HOSTS[host]
    assert set(hookdeadline.DEADLINES[host]) == {k.value for k in adapter.TIMEOUTS}
    for kind, timeout in adapter.TIMEOUTS.items():
        assert hookdeadline.deadline_for(host, kind.value) == pytest.approx(
            hookdeadline.SHARE * timeout - hookdeadline.EXIT_MARGIN_S
        )
        # Room for the reserves a wait leaves for what follows it.
        assert hookdeadline.deadline_for(host, kind.value) > 2 * hookdeadline.LOCAL_RESERVE_S
    assert hookdeadline.deadline_for(host) == min(hookdeadline.DEADLINES[host].values())
    assert hookdeadline.deadline_for(host, "subagent_stop") == hookdeadline.deadline_for(host)
    assert hookdeadline.deadline_for("cursor", "prompt_submit") + hookdeadline.EXIT_MARGIN_S <= 4.0
    assert hookdeadline.deadline_for("vscode") == hookdeadline.FALLBACK_S


@pytest.mark.parametrize("host", list(HOSTS))
def test_nothing_is_what_the_adapter_renders_for_an_empty_reply(host: str) -> None:
    for kind in KINDS:
        event = HookEvent(host, kind, "x", "s", "", "", "", False)
        rendered = HOSTS[host].render(event, HookReply())
        expected = b"" if rendered is None else json.dumps(rendered).encode() + b"\n"
        assert hookdeadline.NOTHING.get(host, b"") == expected, (host, kind)


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        (b'{"hook_event_name": "beforeSubmitPrompt", "prompt": "stop"}', "prompt_submit"),
        (b'{"session_id":"s","hook_event_name":"Stop"}', "stop"),
        (b'{"hook_event_name" :\n "SubagentStop"}', "stop"),
        (b'{"hook_event_name":"SessionStart"}', "session_start"),
        (b'{"hook_event_name":"UserPromptSubmit"}', "prompt_submit"),
        (b'{"hook_event_name":"PreToolUse"}', None),
        (b'{"hook_event_name":"\\u0053top"}', None),  # escaped: left to the parse
        (b'{"prompt":"hook_event_name"}', None),
        (b"", None),
    ],
)
def test_payload_kind_is_a_cheap_look(raw: bytes, kind: str | None) -> None:
    assert hookdeadline.payload_kind(raw) == kind


def test_process_age_counts_the_interpreter_start() -> None:
    """A process that sleeps before asking still reports its whole age."""
    code = "import time; time.sleep(0.5)\nfrom memself.hookdeadline import process_age\nprint(process_age())"
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    elapsed = time.monotonic() - started
    age = float(done.stdout)
    assert 0.5 <= age <= elapsed + 0.05, (age, elapsed)


def test_nothing_is_armed_in_process() -> None:
    """``run`` answers hook after hook inside the engine: no deadline, no claimed answer."""
    assert not hookdeadline.armed() and hookdeadline.remaining() is None
    assert hookdeadline.budget(2.0, 1.0) == 2.0
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
