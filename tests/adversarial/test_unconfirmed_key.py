"""A key in the original plugin's format (``side-secret.json`` with ``apiKey`` alone) goes nowhere
until the user confirms the address it is for.

The attack: the original's ``memory_config`` tool changes ``sideApiBase`` without asking. A key
in its format used to be bound to whatever address was configured at its first use (by the judge,
or by ``memself doctor``, which also sent a ping), so the key went to the changed address and the
binding then protected that address. A real listener on 127.0.0.1 plays the changed address;
nothing reaches it (hooks, the racing judge, doctor without a terminal, key status, the MCP
server, doctor answered "no" at a real terminal) until the user confirms it at a terminal or
enters the key again with ``memself key set``.
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import anyio

from memself.config import load_config
from memself.judge import jobs
from memself.judge.credentials import write_api_key
from memself.judge.start import maybe_start_judge
from memself.paths import DataPaths
from memself.text import messages as texts
from tests.adversarial.test_key_redirect import prompt, run_judge_process, session_start, wait_jobs_done
from tests.support.cli import memself as run_memself
from tests.support.hookproc import hook_data
from tests.support.judge_helpers import API_KEY, NOW, configure
from tests.support.judge_server import FakeJudge, plain, remember, sse
from tests.support.judge_server import running_judge as listening
from tests.support.mcp_client import session_calls, text_of

__all__ = ["hook_data"]

REPO_ROOT = Path(__file__).resolve().parents[2]
PAUSED = "记忆沉淀已暂停"
HOW = "memself doctor"
ORIGINAL_FORMAT = {"apiKey": API_KEY}


def original_key(paths: DataPaths) -> None:
    paths.side_secret.write_text(json.dumps(ORIGINAL_FORMAT), encoding="utf-8")


def stored_key(paths: DataPaths) -> dict:
    return json.loads(paths.side_secret.read_text(encoding="utf-8"))


def cli_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def memself(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return run_memself(*args, stdin=stdin, env=cli_env())


def doctor_at_a_terminal(answer: str) -> str:
    """``memself doctor`` with a real terminal (a pty) as stdin and stdout; ``answer`` is typed
    when it asks. Returns everything it printed."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "memself", "doctor"],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env=cli_env(),
        close_fds=True,
    )
    os.close(follower)
    out = b""
    answered = False
    deadline = time.monotonic() + 180
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(leader, 65536)
                except OSError:  # the child closed the terminal
                    break
                if not chunk:
                    break
                out += chunk
            if not answered and b"[y/N]" in out:
                os.write(leader, answer.encode() + b"\n")
                answered = True
            if proc.poll() is not None and not ready:
                break
    finally:
        proc.wait(timeout=60)
        os.close(leader)
    # The terminal's encoding: the child's console (GBK in the foreign-platform mode).
    return out.decode(os.environ.get("PYTHONIOENCODING") or "utf-8", errors="replace")


def assert_nothing_reached(listener: FakeJudge) -> None:
    assert listener.requests == [], [r.headers.get("Authorization") for r in listener.requests]


def test_an_original_format_key_goes_nowhere_until_the_user_confirms_at_a_terminal(
    hook_data: DataPaths,
) -> None:
    paths = hook_data
    with listening() as changed:
        # The changed address is configured; the key is in the original's format.
        configure(paths, changed.url, confirm=True)
        # A job that passed the prompt hook's check just before the key file became the
        # original's (the race): the judge itself must not send either.
        racing = maybe_start_judge(
            paths,
            load_config(paths),
            "claude",
            "sess-r",
            "p-0",
            "记住：提交前先跑全部测试",
            NOW,
            spawn=lambda *_: None,
        )
        assert racing is not None
        original_key(paths)
        changed.script(plain("OK"), sse(remember("回答问题时一律使用中文", "rule")))

        start_text = session_start("sess-a")
        context = prompt("sess-a", "记住：以后回答都用中文", "p-1")
        run_judge_process(jobs.job_path(paths, racing))
        done = {j["id"]: j for j in wait_jobs_done(paths)}
        doctor_piped = memself("doctor")
        status = memself("key", "status")
        _, _, (config_result,) = anyio.run(session_calls, "claude", [("memory_config", {})])
        declined = doctor_at_a_terminal("n")
        assert_nothing_reached(changed)
        assert stored_key(paths) == ORIGINAL_FORMAT  # nothing was bound

        for text in (start_text, context):
            assert texts.DEPOSITION_PAUSED_UNCONFIRMED in text and HOW in text
        assert set(done) == {racing} and done[racing]["status"] == jobs.NONE
        assert done[racing]["reason"] == "key-unconfirmed"
        assert "原插件格式" in doctor_piped.stdout and HOW in doctor_piped.stdout, doctor_piped.stdout
        assert "没有发送请求" in doctor_piped.stdout
        assert "原插件格式" in status.stdout and PAUSED in status.stdout
        assert PAUSED in text_of(config_result)
        assert changed.url.split("//")[1] in declined and "[y/N]" in declined, declined

        # The user checks the address at a terminal and confirms it: bound, and the ping goes.
        confirmed = doctor_at_a_terminal("y")
        assert stored_key(paths) == {"apiKey": API_KEY, "boundApiBase": changed.url}
        assert len(changed.requests) == 1 and "真实请求成功" in confirmed, confirmed
        assert changed.requests[0].headers["Authorization"] == f"Bearer {API_KEY}"
        # From now on learning works.
        assert PAUSED not in prompt("sess-a", "记住：以后回答都用中文", "p-2")
        wait_jobs_done(paths)
        assert len(changed.requests) == 2
    log = paths.log_file.read_text(encoding="utf-8")
    assert "side-key-unconfirmed" in log and API_KEY not in log


def test_key_set_confirms_the_address_and_learning_resumes(hook_data: DataPaths) -> None:
    paths = hook_data
    with listening() as endpoint:
        configure(paths, endpoint.url, confirm=True)
        original_key(paths)
        endpoint.script(sse(remember("回答问题时一律使用中文", "rule")))
        assert PAUSED in prompt("sess-a", "记住：以后回答都用中文", "p-1")
        wait_jobs_done(paths)
        assert_nothing_reached(endpoint)
        done = memself("key", "set", stdin="sk-entered-again-0123456789\n")
        assert done.returncode == 0, done.stderr
        assert stored_key(paths) == {"apiKey": "sk-entered-again-0123456789", "boundApiBase": endpoint.url}
        assert PAUSED not in prompt("sess-a", "记住：以后回答都用中文", "p-2")
        wait_jobs_done(paths)
        assert len(endpoint.requests) == 1
        assert endpoint.requests[0].headers["Authorization"] == "Bearer sk-entered-again-0123456789"


def test_setup_asks_before_binding_an_original_format_key() -> None:
    from memself.install.setup_flow import confirm_original_key

    paths = DataPaths.default()
    configure(paths, "http://127.0.0.1:9/v1", confirm=True)

    class Answer:
        def __init__(self, value: bool) -> None:
            self.value, self.asked = value, 0

        def ask(self, question: str, default: str = "") -> str:
            raise AssertionError(question)

        def secret(self, question: str) -> str:
            raise AssertionError(question)

        def confirm(self, question: str, default: bool) -> bool:
            assert default is False
            self.asked += 1
            return self.value

    shown: list[str] = []
    original_key(paths)
    for value in (False, True):
        answer = Answer(value)
        confirm_original_key(paths, answer, shown.append)
        assert answer.asked == 1
        if not value:
            assert stored_key(paths) == ORIGINAL_FORMAT
    assert any("127.0.0.1:9" in line for line in shown)
    assert stored_key(paths) == {"apiKey": API_KEY, "boundApiBase": "http://127.0.0.1:9/v1"}
    write_api_key(paths, API_KEY, "http://127.0.0.1:9/v1")
    already = Answer(True)
    confirm_original_key(paths, already, shown.append)
    assert already.asked == 0  # a bound key is not asked about
