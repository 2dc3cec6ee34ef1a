"""The hook's fast path (``memself.hook.process``): with a ready engine, the hook process
forwards stdin and prints the engine's answer, importing almost nothing; everything else runs
``memself.hook.run`` locally, as before."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest

from memself.engine.client import call_engine
from memself.engine.protocol import MAX_RESPONSE_BYTES, OP_HOOK_FORWARD, pack
from memself.hook import inputs, process
from memself.hook.command import hook_command
from memself.hook.inputs import Stdin
from memself.hook.run import ENGINE_KINDS, FIXED_NOW_ENV, RunContext, now_from_env, run
from memself.hosts import HOSTS
from memself.hosts.base import EventKind, HookEvent, HookReply
from memself.paths import DataPaths, data_root
from memself.warm.service import run_forwarded
from tests.support.fastpath_service import RECALLED_RULE, scripted_core
from tests.support.hookproc import hook_data, hook_runs, run_entry
from tests.test_hook_imports import imported_modules

__all__ = ["hook_data"]

# What the fast path exists to avoid (measured 20-25 ms each under ``-I -S`` on these machines).
NOT_ON_THE_FAST_PATH = {
    "json",
    "re",
    "enum",
    "typing",
    "pathlib",
    "threading",
    "datetime",
    "dataclasses",
    "memself.hook.run",
    "memself.hosts",
    "memself.hook.core",
    "memself.engine.client",
    # Extension modules and the annotations future cost the hook start-up time for nothing it
    # needs: hex instead of base64, a non-blocking first read instead of select.
    "binascii",
    "select",
    "__future__",
}


class RecordingEnv(dict):
    """An environment that remembers every key asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: set[str] = set()

    def get(self, key: str, default: object = None) -> object:  # type: ignore[override]
        self.asked.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> str:
        self.asked.add(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self.asked.add(str(key))
        return super().__contains__(key)


def test_adapters_read_only_the_forwarded_environment() -> None:
    """The engine sees only the forwarded part of the hook's environment (a rule that names no
    host): nothing else may matter."""
    asked: set[str] = set()
    for adapter in HOSTS.values():
        for kind, name in adapter.EVENT_NAMES.items():
            for payload in (
                {"hook_event_name": name, "session_id": "s", "prompt": "p"},
                {"hook_event_name": name, "cursor_version": "3.20"},
            ):
                env = RecordingEnv()
                event = adapter.parse(payload, env)
                assert event.kind is kind
                adapter.steps_aside(payload, env, lambda host: True)
                asked |= env.asked
    env = RecordingEnv()
    now_from_env(env)
    asked |= env.asked
    assert asked, "the recording saw nothing: the check would be vacuous"
    assert {key for key in asked if not process.forwarded(key)} == set()
    assert not process.forwarded("OPENAI_API_KEY") and not process.forwarded("PATH")


def test_the_engine_is_asked_for_the_kinds_it_answers() -> None:
    assert ENGINE_KINDS == (EventKind.SESSION_START, EventKind.PROMPT_SUBMIT)


@pytest.mark.parametrize("host", list(HOSTS))
def test_each_registered_command_names_its_event(host: str) -> None:
    """The hook process knows what it runs for from its command line, with no table of host
    event names: each event's command names its kind."""
    for kind in HOSTS[host].EVENT_NAMES:
        assert inputs.event_arg(hook_command(host, kind)) == kind.value
    assert inputs.event_arg(hook_command(host)) == ""
    assert inputs.event_arg(["--agent", host, "--event=Prompt_Submit "]) == "prompt_submit"


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        (b'{"hook_event_name": "beforeSubmitPrompt", "prompt": "stop"}', "prompt_submit"),
        (b'{"session_id":"s","hook_event_name":"Stop"}', "stop"),
        (b'{"hook_event_name" :\n "SubagentStop"}', "subagent_stop"),
        (b'\xef\xbb\xbf{"hook_event_name":"SessionStart"}', "session_start"),
        (b'{"hook_event_name":"UserPromptSubmi\\u0074"}', "prompt_submit"),
        (b'{"hook_event_name":"PreToolUse"}', ""),
        (b'{"prompt":"hook_event_name"}', ""),
        (b'["SessionStart"]', ""),
        (b"{", ""),
        (b"", ""),
    ],
)
def test_a_command_naming_no_event_takes_it_from_the_payload(raw: bytes, kind: str) -> None:
    """An older install's command and ``memself hook`` name no event: the payload is parsed as
    the local run parses it."""
    assert process.payload_kind(Stdin(raw)) == kind
    assert process.payload_kind(Stdin(raw, truncated=True)) == ""


@pytest.mark.parametrize("home", ["", "~/mem-data", "/tmp/a//b/"])
def test_data_root_honours_memself_home(home: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if home:
        monkeypatch.setenv("MEMSELF_HOME", home)
    else:
        monkeypatch.delenv("MEMSELF_HOME", raising=False)
    expected = Path(home).expanduser() if home else Path.home() / ".memory-self-evolution"
    assert data_root() == expected


def test_request_is_json_with_only_the_forwarded_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", 'C:\\work "quoted"\n\x01tab\t')
    monkeypatch.setenv("CURSOR_VERSION", "bad\udcffbyte")  # undecodable byte (surrogateescape)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-forwarded")
    monkeypatch.setenv("CURSOR_VERSION_KEY", "never-forwarded")
    raw = b"\xef\xbb\xbf" + bytes(range(256))
    body = process.request_body("claude", raw, 1764490000.25)
    assert b"sk-never-forwarded" not in body and b"CURSOR_VERSION_KEY" not in body
    message = json.loads(body)
    assert message["op"] == OP_HOOK_FORWARD
    payload = message["payload"]
    assert bytes.fromhex(payload["stdinHex"]) == raw
    # Whatever else of the rule's shape this test's environment holds travels too.
    assert payload["env"] == {key: value for key, value in os.environ.items() if process.forwarded(key)}
    assert payload["env"]["CLAUDE_PROJECT_DIR"] == 'C:\\work "quoted"\n\x01tab\t'
    assert payload["env"]["CURSOR_VERSION"] == "bad\udcffbyte"
    assert payload["started"] == 1764490000.25
    assert payload["host"] == "claude"
    assert payload["home"] == os.path.expanduser("~")


def test_replies_as_the_server_frames_them() -> None:
    def body(response: dict) -> bytes:
        return pack(response, MAX_RESPONSE_BYTES)[4:]

    out = '{"a":"中文"}\n'.encode()
    assert process.parse_reply(body({"ok": True, "result": {"stdoutHex": out.hex()}})) == ("out", out)
    assert process.parse_reply(body({"ok": True, "result": {"stdoutHex": ""}})) == ("out", b"")
    # Not hex, in the fast shape and in any other: a protocol error, never a crash.
    assert process.parse_reply(body({"ok": True, "result": {"stdoutHex": "zz"}})) == ("error", "protocol")
    assert process.parse_reply(body({"ok": True, "result": {"stdoutHex": "abc", "x": 1}})) == (
        "error",
        "protocol",
    )
    assert process.parse_reply(body({"ok": True, "result": {"local": True}})) == ("local", "")
    assert process.parse_reply(body({"ok": False, "error": "not-ready", "message": "正在加载"})) == (
        "error",
        "not-ready",
    )
    assert process.parse_reply(b"{not json") == ("error", "protocol")
    assert process.parse_reply(body({"ok": True, "result": {"other": 1}})) == ("error", "protocol")


NOW = datetime(2026, 11, 30, 9, 0, tzinfo=timezone.utc)


def _forward_payload(host: str, raw: bytes, env: dict[str, str]) -> dict:
    return {
        "host": host,
        "stdinHex": raw.hex(),
        "env": env,
        "home": "/nonexistent-home",
        "started": NOW.timestamp(),
        "utcoffset": 0,
        "zone": "UTC",
    }


@pytest.mark.parametrize("host", list(HOSTS))
@pytest.mark.parametrize("kind", [EventKind.SESSION_START, EventKind.PROMPT_SUBMIT])
def test_run_forwarded_prints_what_a_local_run_prints(
    host: str, kind: EventKind, isolated_home: Path
) -> None:
    """Same stdin, environment and core: the engine's answer is the local run's, byte for byte."""
    paths = DataPaths.default()
    paths.ensure()
    raw = json.dumps(
        {
            "hook_event_name": HOSTS[host].EVENT_NAMES[kind],
            "session_id": "s-1",
            "conversation_id": "s-1",
            "prompt": "记住：回答用中文",
        }
    ).encode()
    env = {
        "CLAUDE_PROJECT_DIR": "/p/claude",
        "CURSOR_PROJECT_DIR": "/p/cursor",
        "CODEBUDDY_PROJECT_DIR": "/p/cb",
        "WORKBUDDY_PROJECT_DIR": "/p/wb",
        FIXED_NOW_ENV: NOW.isoformat(),
    }
    local = io.BytesIO()
    run(
        Stdin(raw),
        RunContext(host, core=scripted_core, env=env, home=Path("/nonexistent-home"), stdout=local),
    )
    answer = run_forwarded(_forward_payload(host, raw, env), paths, scripted_core)
    assert bytes.fromhex(answer["stdoutHex"]) == local.getvalue()
    assert b"/p/" in local.getvalue()  # the forwarded environment reached the parse
    runs = hook_runs(paths)
    assert [r.get("note") for r in runs] == [None, "engine"]


@pytest.mark.parametrize(
    "raw",
    [
        json.dumps({"hook_event_name": "Stop", "session_id": "s"}).encode(),
        json.dumps({"hook_event_name": "PreToolUse", "session_id": "s"}).encode(),
        b"{broken",
        b"[1]",
    ],
    ids=["stop", "unknown-event", "bad-json", "not-object"],
)
def test_run_forwarded_leaves_the_rest_to_the_hook_process(raw: bytes, isolated_home: Path) -> None:
    paths = DataPaths.default()

    def core(event: HookEvent, now: datetime, paths: DataPaths) -> HookReply:
        raise AssertionError("the engine must not run this event")

    assert run_forwarded(_forward_payload("claude", raw, {}), paths, core) == {"local": True}
    assert hook_runs(paths) == []


@pytest.fixture
def fast_engine(hook_data: DataPaths, monkeypatch: pytest.MonkeyPatch) -> Iterator[DataPaths]:
    monkeypatch.setenv("MEMSELF_ENGINE_SERVICE", "tests.support.fastpath_service:make")
    call_engine(hook_data, "recall", {"text": "预热"}, timeout_s=30)
    yield hook_data


@pytest.mark.parametrize("host", list(HOSTS))
def test_the_real_entry_answers_through_the_engine_importing_almost_nothing(
    host: str, fast_engine: DataPaths
) -> None:
    adapter = HOSTS[host]
    env = {
        **os.environ,
        "CLAUDE_PROJECT_DIR": "/p/claude",
        "CURSOR_PROJECT_DIR": "/p/cursor",
        "CODEBUDDY_PROJECT_DIR": "/p/cb",
        "WORKBUDDY_PROJECT_DIR": "/p/wb",
        FIXED_NOW_ENV: NOW.isoformat(),
    }
    engine_pid = call_engine(fast_engine, "ping", {}, timeout_s=5)["pid"]
    for kind in (EventKind.SESSION_START, EventKind.PROMPT_SUBMIT):
        payload = {
            "hook_event_name": adapter.EVENT_NAMES[kind],
            "session_id": "s-fast",
            "conversation_id": "s-fast",
            "prompt": "快速路径的问题",
        }
        proc = run_entry(host, json.dumps(payload).encode(), env=env, python_flags=["-X", "importtime"])
        assert proc.rc == 0
        event = adapter.parse(payload, env)
        expected = (
            json.dumps(
                adapter.render(event, scripted_core(event, NOW, fast_engine)),
                ensure_ascii=False,
                separators=(",", ":"),
            )
            + "\n"
        )
        # Answered by the engine process, byte for byte what a local run renders.
        assert proc.stdout.decode() == expected.replace(f"pid={os.getpid()} ", f"pid={engine_pid} ")
        assert f"now={NOW.isoformat()}" in expected and "cwd=/p/" in expected
        modules = imported_modules(proc.stderr)
        # The measurement itself works: the fast path's own modules are seen.
        assert {"memself.hook.process", "memself.hook.deadline"} <= modules
        assert sorted(modules & NOT_ON_THE_FAST_PATH) == []
    runs = [r for r in hook_runs(fast_engine) if r["host"] == host]
    assert [(r["kind"], r.get("note")) for r in runs] == [
        ("session_start", "engine"),
        ("prompt_submit", "engine"),
    ]


@pytest.mark.parametrize("quoted", [False, True], ids=["stop", "stop-quoting-event-names"])
def test_stop_still_runs_in_the_hook_process(quoted: bool, fast_engine: DataPaths) -> None:
    """A Stop never waits on the engine, also one that quotes the other events' names."""
    payload = {
        "hook_event_name": "Stop",
        "session_id": "s-stop",
        "stop_hook_active": False,
        "last_assistant_message": "UserPromptSubmit and SessionStart" if quoted else "",
    }
    proc = run_entry("claude", json.dumps(payload).encode(), python_flags=["-X", "importtime"])
    assert proc.rc == 0
    assert "memself.hook.run" in imported_modules(proc.stderr)
    runs = hook_runs(fast_engine)
    assert [(r["kind"], r.get("note")) for r in runs] == [("stop", None)]


def test_without_an_engine_the_hook_runs_locally_once(
    hook_data: DataPaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No engine: the fast path's "unreachable" goes to the local run, which does not ask again and
    answers from the local core (and starts an engine for the next turn)."""
    monkeypatch.setenv("MEMSELF_ENGINE_SERVICE", "tests.support.fastpath_service:make")
    payload = {"hook_event_name": "SessionStart", "session_id": "s-cold"}
    proc = run_entry("claude", json.dumps(payload).encode())
    assert proc.rc == 0
    assert "engine pid=" not in proc.stdout.decode()
    runs = hook_runs(hook_data)
    assert [(r["kind"], r.get("note")) for r in runs] == [("session_start", "local:unreachable")]


def test_an_event_name_spelled_with_escapes_is_answered_by_the_engine(fast_engine: DataPaths) -> None:
    """The registered command names its event: however the host spells the payload, a prompt
    goes to the engine, which parses it."""
    raw = (
        b'{"hook_event_name": "UserPromptSubmi\\u0074", "session_id": "s-escaped",'
        b' "prompt": "\\u5e2e\\u6211\\u770b\\u4e0b\\u53d1\\u5e03\\u6d41\\u7a0b"}'
    )
    assert json.loads(raw)["hook_event_name"] == "UserPromptSubmit"
    proc = run_entry("claude", raw, python_flags=["-X", "importtime"])
    assert proc.rc == 0
    assert "engine pid=" in proc.stdout.decode() and "prompt=帮我看下发布流程" in proc.stdout.decode()
    assert sorted(imported_modules(proc.stderr) & NOT_ON_THE_FAST_PATH) == []
    runs = hook_runs(fast_engine)
    assert [(r["kind"], r.get("note")) for r in runs] == [("prompt_submit", "engine")]


def test_a_prompt_whose_stdin_stays_open_runs_here_with_the_engines_recall(
    fast_engine: DataPaths, tmp_path: Path
) -> None:
    """A host that never closes stdin: the hook stops reading after its stdin timeout and does
    not forward what may be half an event; the core runs in the hook process and asks the warm
    engine for its recall only (``recall``, not a whole hook)."""
    import subprocess

    payload = {"hook_event_name": "UserPromptSubmit", "session_id": "s-open", "prompt": "帮我看下发布流程"}
    argv = hook_command("claude", EventKind.PROMPT_SUBMIT)
    argv[1:1] = ["-X", "importtime"]
    with (tmp_path / "out").open("wb") as stdout, (tmp_path / "err").open("wb") as stderr:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=stdout, stderr=stderr, cwd=tmp_path)
        assert proc.stdin is not None
        try:
            proc.stdin.write(json.dumps(payload).encode())
            proc.stdin.flush()  # and left open until the hook has answered
            assert proc.wait(timeout=60) == 0
        finally:
            proc.stdin.close()
            proc.wait(timeout=60)
    out, err = (tmp_path / "out").read_bytes(), (tmp_path / "err").read_bytes()
    answer = json.loads(out)
    assert RECALLED_RULE in answer["hookSpecificOutput"]["additionalContext"]
    assert b"engine pid=" not in out  # not the engine's scripted hook
    assert "memself.hook.core" in imported_modules(err)
    runs = hook_runs(fast_engine)
    assert [(r["kind"], r.get("note")) for r in runs] == [("prompt_submit", "stdin-timeout")]


def test_the_cli_hook_takes_the_same_path(fast_engine: DataPaths) -> None:
    """``memself hook`` is the entry's slow twin: a warm engine answers it through the fast path."""
    import subprocess
    import sys

    payload = {"hook_event_name": "UserPromptSubmit", "session_id": "s-cli", "prompt": "命令行的问题"}
    done = subprocess.run(
        [sys.executable, "-m", "memself", "hook", "--agent", "claude"],
        input=json.dumps(payload).encode(),
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-500:]
    assert "engine pid=" in done.stdout.decode() and "prompt=命令行的问题" in done.stdout.decode()
    runs = hook_runs(fast_engine)
    assert [(r["kind"], r.get("note")) for r in runs] == [("prompt_submit", "engine")]
