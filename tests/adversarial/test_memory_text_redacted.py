"""Memory text leaves the machine redacted, like the prompt.

The judge's dedup request carries the texts of the nearest existing memories. A memory may hold a
secret (``memself rule add`` stores what the user typed, password included); a later, unrelated
prompt whose memory lands near it sent that memory verbatim to the endpoint. Every string of
every request body goes through the same redaction, whoever built it.
"""

from __future__ import annotations

import ast
import json
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

import memself
from memself.cli import main
from memself.config import load_config
from memself.judge import jobs, prompts
from memself.judge.http import chat
from memself.judge.worker import run_job
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from tests.support.judge_helpers import API_KEY, NOW, clock, configure, overlap_nearest, start_job
from tests.support.judge_server import dedup, remember, running_judge, sse

PASSWORD = "Qw3rty!2026"
TOKEN = "ghp_" + "Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8"
PHONE = "13912345678"

# (group, memory text as the user added it, what must not leave, the later unrelated memory)
CASES = [
    (
        "rule",
        f"连测试服务器 10.0.0.8 用 root 账号，密码是 {PASSWORD}",
        PASSWORD,
        "测试服务器上的日志统一放在 /data/logs 目录",
    ),
    (
        "project",
        f"部署流水线访问仓库用的令牌是 {TOKEN}",
        TOKEN,
        "部署流水线失败时先看仓库的 Actions 日志",
    ),
    ("project", f"值班负责人王工的手机 {PHONE}", PHONE, "值班负责人每周一在群里轮换"),
    # Quoted: once JSON-encoded the quotes are escaped and no longer set the value off.
    ("rule", '堡垒机的口令是 "blue fox 42"，每季度更换', "blue fox 42", "堡垒机登录后先切到 ops 用户"),
]


@pytest.fixture
def judge():
    with running_judge() as server:
        yield server


@pytest.mark.parametrize(
    ("group", "stored", "secret", "later"), CASES, ids=["password", "token", "phone", "quoted"]
)
def test_nearest_memories_are_redacted_in_the_dedup_request(
    judge, group: str, stored: str, secret: str, later: str
) -> None:
    paths = DataPaths.default()
    configure(paths, judge.url, confirm=True)
    added = CliRunner().invoke(main, [group, "add", stored, "--global"])
    assert added.exit_code == 0, added.output
    store = MemoryStore(paths)
    [memory] = store.all()
    assert secret in memory.text  # kept locally as the user typed it
    sid = start_job(paths, f"记住：{later}")
    judge.script(sse(remember(later, group=group)), sse(dedup("create")))
    job = run_job(
        jobs.job_path(paths, sid),
        clock(NOW + timedelta(seconds=3)),
        overlap_nearest(store),
        store,
        load_config(paths),
        timeout=5.0,
    )
    assert job is not None and job["status"] == jobs.READY, job
    assert len(judge.requests) == 2  # remember, then dedup against the stored memory
    dedup_message = judge.user_messages[1]
    assert memory.id in dedup_message and "[已隐去]" in dedup_message, dedup_message
    for request in judge.requests:
        assert secret not in request.raw
        assert secret not in json.dumps(request.body, ensure_ascii=False)


def test_every_string_of_a_request_body_is_redacted(judge) -> None:
    """The body builder redacts whatever a caller hands it: no caller can forget."""
    judge.script(sse("好的"))
    system = f"{prompts.DEDUP_SYSTEM}\n附注：管理后台密码是 {PASSWORD}"
    user = f'new：x\ncandidates：[{{"id":"mem-1","text":"令牌是 {TOKEN}，联系 {PHONE}"}}]'
    assert chat(judge.url, "fake-judge", API_KEY, system, user, timeout=5.0) == "好的"
    [request] = judge.requests
    for secret in (PASSWORD, TOKEN, PHONE):
        assert secret not in request.raw
    system_sent, user_sent = (m["content"] for m in request.body["messages"])
    # The judge's own prompts pass unchanged: redaction touches only what holds a secret.
    assert system_sent == f"{prompts.DEDUP_SYSTEM}\n附注：管理后台密码是 [已隐去]"
    assert user_sent.count("[已隐去]") == 2, user_sent
    assert request.headers["Authorization"] == f"Bearer {API_KEY}"


@pytest.mark.parametrize(
    "system",
    [prompts.REMEMBER_SYSTEM, prompts.REMEMBER_SYSTEM_SCOPED, prompts.DEDUP_SYSTEM],
    ids=["remember", "remember-scoped", "dedup"],
)
def test_the_judges_prompts_pass_redaction_unchanged(judge, system: str) -> None:
    judge.script(sse("好的"))
    chat(judge.url, "fake-judge", API_KEY, system, "回答一律使用中文", timeout=5.0)
    [request] = judge.requests
    assert [m["content"] for m in request.body["messages"]] == [system, "回答一律使用中文"]


_HTTP_CLIENTS = ("httpx", "requests", "aiohttp", "urllib.request", "http.client", "urllib3")
# The judge's one request builder, and the model hub's HEAD probe (no body, no memory text).
_ALLOWED_CLIENT_USERS = {"judge/http.py", "model/hub.py"}


def test_only_the_request_builder_talks_to_an_endpoint() -> None:
    """A second module with an HTTP client could send text around ``request_body``."""
    root = Path(memself.__file__).parent
    users = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(n == c or n.startswith(c + ".") for n in names for c in _HTTP_CLIENTS):
                users.add(path.relative_to(root).as_posix())
    assert users == _ALLOWED_CLIENT_USERS
