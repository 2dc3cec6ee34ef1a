"""A full disk must not disable learning for good, nor leave the hook saying learning is on.

The accident: the first judged prompt runs on a full disk; ``session-secret`` is created but its
64 hex characters are never written, and every later prompt failed on an "invalid secret" while
the hook still told the model that learning was on. The full disk is real: the hook runs in a
child with ``RLIMIT_FSIZE`` 0, so every file write fails with EFBIG.
"""

from __future__ import annotations

import json
import multiprocessing
import re
import resource
import subprocess
import tempfile
import time

import pytest

from memself import doctor
from memself.hook.command import hook_command
from memself.hosts import HOSTS
from memself.hosts.base import EventKind
from memself.judge import jobs
from memself.judge.credentials import load_or_create_session_secret
from memself.paths import DataPaths
from tests.support.hookproc import hook_data
from tests.support.judge_helpers import configure
from tests.support.judge_server import remember, running_judge, sse

__all__ = ["hook_data"]

SECRET_RE = re.compile(r"^[a-f0-9]{64}\n$")
ON = "只有收到含 MEMORY_CONFIRM_V1 的插件指令时"
PAUSED = "记忆沉淀已暂停"
REPAIRED = "另存为 session-secret.invalid-"


def _full_disk() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))


def prompt_hook(session: str, text: str, turn: str, *, full_disk: bool = False) -> str:
    payload = {
        "hook_event_name": HOSTS["claude"].EVENT_NAMES[EventKind.PROMPT_SUBMIT],
        "session_id": session,
        "prompt": text,
        "prompt_id": turn,
        "cwd": "/tmp",
    }
    done = subprocess.run(
        hook_command("claude"),
        input=json.dumps(payload).encode(),
        capture_output=True,
        timeout=60,
        cwd=tempfile.gettempdir(),
        preexec_fn=_full_disk if full_disk else None,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    answer = json.loads(done.stdout) if done.stdout.strip() else {}
    return answer.get("hookSpecificOutput", {}).get("additionalContext", "")


def wait_jobs_done(paths: DataPaths, count: int, timeout: float = 30) -> list[dict]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [jobs.read_job(p) for p in paths.side_dir.glob("s_*.json")]
        if len(found) >= count and all(j and j["status"] != "running" for j in found):
            return [j for j in found if j]
        time.sleep(0.1)
    raise AssertionError("judge jobs not done")


def set_aside(paths: DataPaths) -> list:
    return sorted(paths.root.glob("session-secret.invalid-*"))


def test_full_disk_on_first_use_then_the_next_run_recovers(hook_data: DataPaths) -> None:
    paths = hook_data
    with running_judge() as judge:
        configure(paths, judge.url, confirm=True)
        context = prompt_hook("sess-a", "记住：以后回答都用中文", "p-1", full_disk=True)
        assert not paths.session_secret.exists() or SECRET_RE.match(paths.session_secret.read_text())
        assert PAUSED in context and ON not in context
        judge.script(sse(remember("回答问题时一律使用中文", "rule")))
        context = prompt_hook("sess-a", "记住：以后回答都用中文", "p-2")
        assert ON in context and PAUSED not in context
        [job] = wait_jobs_done(paths, 1)
        assert job["status"] == "ready" and len(judge.requests) == 1
    assert SECRET_RE.match(paths.session_secret.read_text())


@pytest.mark.parametrize(
    "content", [b"", b"garbage\n", b"A" * 64 + b"\n"], ids=["empty", "garbage", "upper-hex"]
)
def test_invalid_secret_is_set_aside_regenerated_and_reported(hook_data: DataPaths, content: bytes) -> None:
    paths = hook_data
    with running_judge() as judge:
        configure(paths, judge.url, confirm=True)
        paths.session_secret.write_bytes(content)  # what a full disk left behind
        judge.script(sse(remember("回答问题时一律使用中文", "rule")))
        context = prompt_hook("sess-a", "记住：以后回答都用中文", "p-1")
        assert REPAIRED in context and "session-secret" in context and ON in context
        wait_jobs_done(paths, 1)
        assert len(judge.requests) == 1
        again = prompt_hook("sess-a", "记住：提交前先跑全部测试", "p-2")
    assert REPAIRED not in again  # said once, when it happened
    assert SECRET_RE.match(paths.session_secret.read_text())
    [aside] = set_aside(paths)
    assert aside.read_bytes() == content  # set aside, never deleted
    assert "session-secret-invalid" in paths.log_file.read_text()
    check = doctor.check_secrets(paths)
    assert aside.name in check.summary and "重新生成" in check.summary


def test_invalid_secret_on_a_full_disk_stays_until_it_can_be_replaced(hook_data: DataPaths) -> None:
    paths = hook_data
    with running_judge() as judge:
        configure(paths, judge.url, confirm=True)
        paths.session_secret.write_bytes(b"")
        context = prompt_hook("sess-a", "记住：以后回答都用中文", "p-1", full_disk=True)
        assert PAUSED in context and "session-secret" in context
        # Nothing moved: the replacement could not be written, so the old file stays in place.
        assert paths.session_secret.read_bytes() == b"" and set_aside(paths) == []
        check = doctor.check_secrets(paths)
        assert check.ok is False and "是空文件" in check.summary
        judge.script(sse(remember("回答问题时一律使用中文", "rule")))
        assert REPAIRED in prompt_hook("sess-a", "记住：以后回答都用中文", "p-2")
        wait_jobs_done(paths, 1)
    assert len(set_aside(paths)) == 1 and SECRET_RE.match(paths.session_secret.read_text())


def _race(root: str, barrier, results) -> None:  # a child process's target
    barrier.wait()
    results.put(load_or_create_session_secret(DataPaths.default()))


@pytest.mark.parametrize("start", [None, b"", b"garbage"], ids=["missing", "empty", "garbage"])
def test_racing_processes_end_with_one_secret(start: bytes | None) -> None:
    paths = DataPaths.default()
    paths.ensure()
    if start is not None:
        paths.session_secret.write_bytes(start)
    ctx = multiprocessing.get_context("spawn")  # what Windows has
    barrier, results = ctx.Barrier(8), ctx.Queue()
    procs = [ctx.Process(target=_race, args=(str(paths.root), barrier, results)) for _ in range(8)]
    for proc in procs:
        proc.start()
    values = [results.get(timeout=30) for _ in procs]
    for proc in procs:
        proc.join(30)
    assert len(set(values)) == 1 and paths.session_secret.read_text() == values[0] + "\n"
    assert len(set_aside(paths)) == (0 if start is None else 1)
    assert not [p for p in paths.root.iterdir() if ".tmp" in p.name]


@pytest.mark.parametrize("content", [b"", b'{"apiKey": '], ids=["empty", "cut"])
def test_unusable_key_file_is_reported_not_taken_for_unconfigured(
    hook_data: DataPaths, content: bytes
) -> None:
    paths = hook_data
    configure(paths, "http://127.0.0.1:9/v1", confirm=True)
    paths.side_secret.write_bytes(content)
    context = prompt_hook("sess-a", "记住：以后回答都用中文", "p-1")
    assert PAUSED in context and "side-secret.json" in context and "memself key set" in context
    assert "没有配齐" not in context
    check = doctor.check_judge(paths)
    assert check.ok is False and "side-secret.json" in check.summary
