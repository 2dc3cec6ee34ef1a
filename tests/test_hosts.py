"""Host adapters: the declared interface, captured payloads in, every reply shape out, and the
double-registration rule (Claude-registered hook under Cursor)."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest

from memself.hook.command import (
    ENTRY,
    hook_command,
    hook_command_agent,
    hook_command_line,
    is_our_hook_command,
)
from memself.hosts import HOSTS, claude, codebuddy, cursor, workbuddy
from memself.hosts.base import (
    SESSION_KEY_LIMIT,
    TURN_ID_LIMIT,
    EventKind,
    HookEvent,
    HookReply,
    HostAdapter,
)

PAYLOADS = Path(__file__).parent / "fixtures" / "payloads"
CLAUDE_CAPTURES = sorted(PAYLOADS.glob("claude-code-*.json"))
CODEBUDDY_CAPTURE = PAYLOADS / "codebuddy-code-2.117.0.json"
CURSOR_DOC = PAYLOADS / "cursor-documented.json"
REGISTERED = (EventKind.SESSION_START, EventKind.PROMPT_SUBMIT, EventKind.STOP)


def load(path: Path) -> dict[str, dict]:
    return json.loads(path.read_text(encoding="utf-8"))


# --- the interface ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(HOSTS))
def test_every_adapter_declares_the_protocol(name: str) -> None:
    adapter = HOSTS[name]
    assert adapter.NAME == name
    for member in ("NAME", "ASK_TOOL", "POPUP", "EVENT_NAMES", "TIMEOUTS", "CONTEXT_LIMIT", "OWN_MEMORY"):
        assert hasattr(adapter, member), member
    for member in ("parse", "render", "steps_aside"):
        assert callable(getattr(adapter, member)), member
        declared = inspect.signature(getattr(HostAdapter, member))
        got = inspect.signature(getattr(adapter, member))
        # Same parameters (minus ``self``) in the same order.
        assert list(got.parameters) == list(declared.parameters)[1:], member
    assert set(adapter.EVENT_NAMES) == set(REGISTERED)
    assert set(adapter.TIMEOUTS) == set(REGISTERED)
    assert adapter.ASK_TOOL and adapter.CONTEXT_LIMIT == 10_000


def test_host_table_and_timeouts() -> None:
    assert list(HOSTS) == ["claude", "cursor", "codebuddy", "workbuddy"]
    assert cursor.TIMEOUTS[EventKind.PROMPT_SUBMIT] == 5
    for adapter in (claude, codebuddy, workbuddy):
        assert adapter.TIMEOUTS == {
            EventKind.SESSION_START: 10,
            EventKind.PROMPT_SUBMIT: 10,
            EventKind.STOP: 20,
        }
    assert cursor.EVENT_NAMES[EventKind.PROMPT_SUBMIT] == "beforeSubmitPrompt"
    assert claude.EVENT_NAMES[EventKind.PROMPT_SUBMIT] == "UserPromptSubmit"
    assert cursor.ASK_TOOL == "AskQuestion" and claude.ASK_TOOL == "AskUserQuestion"


# --- parse: captured payloads ----------------------------------------------------------------


@pytest.mark.parametrize("capture", CLAUDE_CAPTURES, ids=lambda p: p.stem)
def test_claude_captures(capture: Path) -> None:
    data = load(capture)
    session = data["SessionStart"]["session_id"]
    start = claude.parse(data["SessionStart"])
    assert (start.kind, start.session_key, start.prompt, start.stop_active) == (
        EventKind.SESSION_START,
        session,
        "",
        False,
    )
    assert start.cwd == "/home/dev/project" and start.host == "claude"
    prompt = claude.parse(data["UserPromptSubmit"])
    assert prompt.kind is EventKind.PROMPT_SUBMIT
    assert prompt.prompt == data["UserPromptSubmit"]["prompt"]
    # prompt_id arrived in 2.1.196; before that there is no turn id.
    assert prompt.turn_id == data["UserPromptSubmit"].get("prompt_id", "")
    assert claude.parse(data["Stop"]).stop_active is False
    assert claude.parse(data["Stop-2"]).stop_active is True
    assert claude.parse(data["Stop"]).kind is EventKind.STOP
    assert claude.parse(data["SessionEnd"]).kind is EventKind.UNKNOWN
    for other in ("PreToolUse", "PostToolUse"):
        if other in data:
            assert claude.parse(data[other]).kind is EventKind.UNKNOWN


@pytest.mark.parametrize("adapter", [codebuddy, workbuddy], ids=lambda a: a.NAME)
def test_codebuddy_capture(adapter) -> None:
    data = load(CODEBUDDY_CAPTURE)
    session = "bcfc939c-69b5-4c26-a5f3-d4f97e09087f"
    start = adapter.parse(data["SessionStart"], {"CODEBUDDY_PROJECT_DIR": "/home/dev/project"})
    assert (start.kind, start.session_key, start.turn_id) == (EventKind.SESSION_START, session, "")
    # SessionStart has no cwd: the hook environment names the project.
    assert start.cwd == "/home/dev/project"
    assert adapter.parse(data["SessionStart"]).cwd == ""
    prompt = adapter.parse(data["UserPromptSubmit"])
    assert (prompt.prompt, prompt.turn_id) == ("please run the tool", "")
    stop = adapter.parse(data["Stop"])
    # Stop carries a generation_id, but prompt and stop must agree: no turn id for CodeBuddy.
    assert (stop.kind, stop.turn_id, stop.stop_active) == (EventKind.STOP, "", False)
    assert adapter.parse(data["Stop-2"]).stop_active is True
    again = adapter.parse(data["UserPromptSubmit-2"])
    assert again.kind is EventKind.PROMPT_SUBMIT and again.prompt.startswith("Stop hook: ")
    assert adapter.parse(data["Notification"]).kind is EventKind.UNKNOWN


@pytest.mark.parametrize("adapter", [codebuddy, workbuddy], ids=lambda a: a.NAME)
def test_codebuddy_accepts_the_original_user_prompt_field(adapter) -> None:
    payload = {"hook_event_name": "UserPromptSubmit", "session_id": "s1", "user_prompt": "记住用中文"}
    assert adapter.parse(payload).prompt == "记住用中文"
    both = dict(payload, prompt="新字段")
    assert adapter.parse(both).prompt == "新字段"


@pytest.mark.parametrize(
    ("root", "seen"),
    [
        ("/c:/dev/proj", "C:/dev/proj"),  # Cursor on Windows writes its URI path
        ("/D:/work", "D:/work"),
        ("/e:\\work", "E:/work"),
        ("/c:", "C:/"),  # the drive's root, not the drive-relative "C:"
        ("C:\\dev\\proj", "C:\\dev\\proj"),
        ("/home/dev/project", "/home/dev/project"),
        ("/cc:/not-a-drive", "/cc:/not-a-drive"),
    ],
)
def test_cursor_windows_roots_lose_their_uri_slash(root: str, seen: str) -> None:
    payload = {"hook_event_name": "sessionStart", "conversation_id": "c1", "workspace_roots": [root]}
    assert cursor.parse(payload).cwd == seen
    # The same payload through the Claude-registered hook Cursor also runs.
    claude_shaped = {"hook_event_name": "SessionStart", "session_id": "c1", "workspace_roots": [root]}
    assert claude.parse(claude_shaped).cwd == seen


def test_cursor_documented_payloads() -> None:
    data = load(CURSOR_DOC)
    conv = data["sessionStart"]["conversation_id"]
    gen = data["sessionStart"]["generation_id"]
    start = cursor.parse(data["sessionStart"])
    assert (start.kind, start.session_key, start.turn_id) == (EventKind.SESSION_START, conv, gen)
    assert start.cwd == "/home/dev/project"  # from workspace_roots
    prompt = cursor.parse(data["beforeSubmitPrompt"])
    assert (prompt.kind, prompt.prompt) == (EventKind.PROMPT_SUBMIT, "以后回答都用中文")
    assert cursor.parse(data["stop"]).stop_active is False
    assert cursor.parse(data["stop-2"]).stop_active is True  # loop_count > 0
    assert cursor.parse(data["stop-aborted"]).stop_active is True  # never continue an abort
    assert cursor.parse(data["subagentStop"]).kind is EventKind.SUBAGENT_STOP


def test_claude_parses_cursor_shaped_payloads() -> None:
    """Cursor runs Claude-registered hooks with its own payload (host-protocols §2.3)."""
    data = load(CURSOR_DOC)
    prompt = claude.parse(data["beforeSubmitPrompt"])
    assert prompt.kind is EventKind.PROMPT_SUBMIT
    assert prompt.session_key == data["beforeSubmitPrompt"]["conversation_id"]
    assert prompt.turn_id == data["beforeSubmitPrompt"]["generation_id"]
    # No stop_hook_active there: loop_count is the only loop guard, and it is honoured.
    assert claude.parse(data["stop-2"]).stop_active is True


@pytest.mark.parametrize("name", list(HOSTS))
def test_keys_are_sanitised_and_cut(name: str) -> None:
    adapter = HOSTS[name]
    payload = {
        "hook_event_name": adapter.EVENT_NAMES[EventKind.PROMPT_SUBMIT],
        "session_id": "  a b/c:" + "x" * 200,
        "conversation_id": "  a b/c:" + "x" * 200,
        "prompt_id": "p/" + "y" * 300,
        "generation_id": "p/" + "y" * 300,
        "prompt": "hi",
        "unknown_field": {"deep": [1, 2]},
    }
    event = adapter.parse(payload)
    assert event.session_key == ("a_b_c_" + "x" * 200)[:SESSION_KEY_LIMIT]
    assert len(event.session_key) == 80
    if name in ("codebuddy", "workbuddy"):
        assert event.turn_id == ""
    else:
        assert event.turn_id == ("p_" + "y" * 300)[:TURN_ID_LIMIT] and len(event.turn_id) == 120


@pytest.mark.parametrize("name", list(HOSTS))
@pytest.mark.parametrize(
    "payload",
    [
        {},
        {"hook_event_name": 7, "session_id": ["x"], "prompt": {"a": 1}, "cwd": 3},
        {"hook_event_name": "UserPromptSubmit", "prompt": None, "stop_hook_active": "yes"},
        {"hook_event_name": "PreToolUse", "session_id": "s"},
    ],
)
def test_parse_tolerates_wrong_types(name: str, payload: dict) -> None:
    event = HOSTS[name].parse(payload)
    assert isinstance(event, HookEvent)
    assert event.prompt == "" and event.stop_active is False and event.cwd == ""
    assert event.session_key in ("", "s")


@pytest.mark.parametrize("name", list(HOSTS))
@pytest.mark.parametrize(
    "spelling",
    [
        "SessionStart",
        "sessionStart",
        "UserPromptSubmit",
        "beforeSubmitPrompt",
        "Stop",
        "stop",
        "SubagentStop",
        "subagentStop",
    ],
)
def test_event_names_of_both_families(name: str, spelling: str) -> None:
    event = HOSTS[name].parse({"hook_event_name": spelling, "session_id": "s", "prompt": "p"})
    expected = {
        "sessionstart": EventKind.SESSION_START,
        "userpromptsubmit": EventKind.PROMPT_SUBMIT,
        "beforesubmitprompt": EventKind.PROMPT_SUBMIT,
        "stop": EventKind.STOP,
        "subagentstop": EventKind.SUBAGENT_STOP,
    }[spelling.lower()]
    assert event.kind is expected and event.event_name == spelling


# --- render: every reply shape ---------------------------------------------------------------

CTX = "规则：回答用中文"
VISIBLE = "memory-self-evolution 捕捉到了新的记忆："
MODEL = "MEMORY_CONFIRM_V1\n只把「结果」下面的文字原样输出给用户"
USER = "召回：回答用中文"


def ev(name: str, kind: EventKind, stop_active: bool = False) -> HookEvent:
    return HookEvent(name, kind, "x", "s", "", "", "", stop_active)


def claude_ctx(event: str) -> dict:
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": CTX}}


# (kind, stop_active, reply) -> expected output per host
RENDER_CASES = [
    (
        "start-context",
        EventKind.SESSION_START,
        False,
        HookReply(context=CTX),
        {
            "claude": claude_ctx("SessionStart"),
            "cursor": {"additional_context": CTX},
            "codebuddy": claude_ctx("SessionStart"),
            "workbuddy": claude_ctx("SessionStart"),
        },
    ),
    (
        "prompt-context",
        EventKind.PROMPT_SUBMIT,
        False,
        HookReply(context=CTX),
        {
            "claude": claude_ctx("UserPromptSubmit"),
            "cursor": {"additional_context": CTX},
            "codebuddy": claude_ctx("UserPromptSubmit"),
            "workbuddy": claude_ctx("UserPromptSubmit"),
        },
    ),
    (
        "prompt-context-showrecall",
        EventKind.PROMPT_SUBMIT,
        False,
        HookReply(context=CTX, user_message=USER),
        {
            "claude": {**claude_ctx("UserPromptSubmit"), "systemMessage": USER},
            "cursor": {"additional_context": CTX},
            "codebuddy": claude_ctx("UserPromptSubmit"),
            "workbuddy": claude_ctx("UserPromptSubmit"),
        },
    ),
    (
        "prompt-user-message-only",
        EventKind.PROMPT_SUBMIT,
        False,
        HookReply(user_message=USER),
        {"claude": {"systemMessage": USER}, "cursor": {}, "codebuddy": None, "workbuddy": None},
    ),
    (
        "prompt-nothing",
        EventKind.PROMPT_SUBMIT,
        False,
        HookReply(),
        {"claude": None, "cursor": {}, "codebuddy": None, "workbuddy": None},
    ),
    (
        "start-nothing",
        EventKind.SESSION_START,
        False,
        HookReply(),
        {"claude": None, "cursor": {}, "codebuddy": None, "workbuddy": None},
    ),
    (
        "stop-continuation",
        EventKind.STOP,
        False,
        HookReply(continuation=MODEL, visible=VISIBLE),
        {
            "claude": {"decision": "block", "reason": VISIBLE + "\n\n" + MODEL},
            "cursor": {"followup_message": VISIBLE},
            "codebuddy": {"decision": "block", "reason": VISIBLE + "\n\n" + MODEL},
            "workbuddy": {"decision": "block", "reason": VISIBLE + "\n\n" + MODEL},
        },
    ),
    (
        "stop-model-text-only",
        EventKind.STOP,
        False,
        HookReply(continuation=MODEL),
        {
            "claude": {"decision": "block", "reason": MODEL},
            "cursor": {"followup_message": MODEL},
            "codebuddy": {"decision": "block", "reason": MODEL},
            "workbuddy": {"decision": "block", "reason": MODEL},
        },
    ),
    (
        "stop-while-continuing",
        EventKind.STOP,
        True,
        HookReply(continuation=MODEL, visible=VISIBLE),
        {"claude": None, "cursor": {}, "codebuddy": None, "workbuddy": None},
    ),
    (
        "stop-nothing",
        EventKind.STOP,
        False,
        HookReply(),
        {"claude": None, "cursor": {}, "codebuddy": None, "workbuddy": None},
    ),
    (
        "subagent-stop",
        EventKind.SUBAGENT_STOP,
        False,
        HookReply(continuation=MODEL, visible=VISIBLE, context=CTX),
        {"claude": None, "cursor": {}, "codebuddy": None, "workbuddy": None},
    ),
    (
        "unknown-event",
        EventKind.UNKNOWN,
        False,
        HookReply(context=CTX, continuation=MODEL),
        {"claude": None, "cursor": {}, "codebuddy": None, "workbuddy": None},
    ),
]


@pytest.mark.parametrize("name", list(HOSTS))
@pytest.mark.parametrize(
    ("case", "kind", "active", "reply", "expected"), RENDER_CASES, ids=[c[0] for c in RENDER_CASES]
)
def test_render(
    name: str, case: str, kind: EventKind, active: bool, reply: HookReply, expected: dict
) -> None:
    out = HOSTS[name].render(ev(name, kind, active), reply)
    assert out == expected[name]
    if out is not None:
        text = json.dumps(out)
        assert '"continue"' not in text  # never: it ends a Claude Code session
        assert "hookSpecificOutput" not in out or "additionalContext" not in out


# --- double registration: Claude-registered hook under Cursor --------------------------------


class Registered:
    """The installers' answer to "does this host's own config hold a hook of ours", recorded."""

    def __init__(self, *hosts: str) -> None:
        self.hosts = set(hosts)
        self.asked: list[str] = []

    def __call__(self, host: str) -> bool:
        self.asked.append(host)
        return host in self.hosts


def test_claude_steps_aside_under_cursor_when_cursor_hook_installed() -> None:
    payload = {"hook_event_name": "UserPromptSubmit", "session_id": "s", "prompt": "p"}
    env = {"CURSOR_VERSION": "3.20.17"}
    assert claude.steps_aside(payload, env, Registered()) is False  # no Cursor hook of ours
    installed = Registered("cursor")
    assert claude.steps_aside(payload, env, installed) is True
    assert installed.asked == ["cursor"]
    plain = Registered("cursor")
    assert claude.steps_aside(payload, {}, plain) is False  # plain Claude Code
    assert plain.asked == []  # nothing read outside Cursor
    assert claude.steps_aside(dict(payload, cursor_version="3.1"), {}, installed) is True
    assert claude.steps_aside(dict(payload, cursor_version=""), {"CURSOR_VERSION": " "}, installed) is False
    for other in (cursor, codebuddy, workbuddy):
        assert other.steps_aside(payload, env, Registered("cursor", "claude")) is False


# --- the registered command ------------------------------------------------------------------


@pytest.mark.parametrize("name", list(HOSTS))
def test_hook_command(name: str) -> None:
    argv = hook_command(name)
    assert argv[1:3] == ["-I", "-S"] and argv[-2:] == ["--agent", name]
    assert Path(argv[0]).is_absolute() and Path(argv[3]).is_absolute()
    assert Path(argv[3]) == ENTRY and ENTRY.is_file()
    assert hook_command_agent(argv) == name and hook_command_agent(hook_command_line(name)) == name


def test_hook_command_rejects_unknown_host() -> None:
    from memself.errors import InvalidInput

    with pytest.raises(InvalidInput):
        hook_command("vscode")


@pytest.mark.parametrize(
    ("cmd", "agent"),
    [
        ('"/usr/bin/node" "/home/u/repo/bin/memory.mjs" hook --agent codebuddy', "codebuddy"),
        ("/usr/local/bin/node /r/bin/memory.mjs hook --agent cursor", "cursor"),
        ("/home/u/.venv/bin/memself hook --agent workbuddy", "workbuddy"),
        ("/usr/bin/python3 -m memself hook --agent=claude", "claude"),
        ("'/opt/py/bin/python3' -I -S '/opt/site/memself/hooks/entry.py' --agent claude", "claude"),
        (r'"C:\Py\python.exe" -I -S "C:\site\memself\hooks\entry.py" --agent cursor', "cursor"),
        # An editable install: where the entry is, and where it was before it moved into the package.
        ("/r/.venv/bin/python -I -S /r/memself/hooks/entry.py --agent codebuddy", "codebuddy"),
        ("'/r/.venv/bin/python' -I -S '/r/hooks/entry.py' --agent workbuddy", "workbuddy"),
        ("python /x/myhooks/entry.py --agent claude", None),
        ("echo hooks/entry.py", None),
        ("node /x/other.mjs hook --agent claude", None),
        ("memself mcp --agent claude", None),
        ("", None),
    ],
)
def test_is_our_hook_command(cmd: str, agent: str | None) -> None:
    assert hook_command_agent(cmd) == agent
    assert is_our_hook_command(cmd) is (agent is not None)
