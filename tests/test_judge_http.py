"""The judge's HTTP call against a real local server: both body styles and every fault."""

from __future__ import annotations

import time

import pytest

from memself.judge.http import ResponseTooLarge, SideApiError, chat, endpoint, parse_body
from tests.support.judge_helpers import judge
from tests.support.judge_server import Reply, huge, plain, sse

__all__ = ["judge"]

KEY = "sk-live-XYZ123456789"


def call(judge, timeout: float = 5.0) -> str:
    return chat(judge.url, "m1", KEY, "系统", "用户的话", timeout)


def test_endpoint() -> None:
    assert endpoint("http://x/v1/") == "http://x/v1/chat/completions"
    assert endpoint("http://x/v1/chat/completions") == "http://x/v1/chat/completions"


def test_sse_and_plain_json(judge) -> None:
    judge.script(sse('{"remember": false}'), plain("普通 JSON 回答"))
    assert call(judge) == '{"remember": false}'
    assert call(judge) == "普通 JSON 回答"
    first = judge.requests[0]
    assert first.path == "/v1/chat/completions"
    assert first.headers["Authorization"] == f"Bearer {KEY}"
    assert first.body["stream"] is True and first.body["model"] == "m1"
    assert "temperature" not in first.body
    assert first.headers["Accept-Encoding"] == "identity"
    assert [m["role"] for m in first.body["messages"]] == ["system", "user"]


@pytest.mark.parametrize("status", [401, 429, 500])
def test_http_errors_name_status_without_key(judge, status: int) -> None:
    judge.script(Reply("status", f'{{"error": "bad key {KEY} ' + "x" * 400 + '"}', status))
    with pytest.raises(SideApiError) as info:
        call(judge)
    message = str(info.value)
    assert message.startswith(f"旁路接口 {status}: ")
    assert KEY not in message
    assert len(message) <= len(f"旁路接口 {status}: ") + 200


def test_empty_body(judge) -> None:
    judge.script(Reply("empty"))
    with pytest.raises(SideApiError, match="旁路接口没有正文"):
        call(judge)


def test_stream_cut_halfway(judge) -> None:
    judge.script(Reply("half", '{"remember": true, "text": "回答问题时使用中文"}'))
    with pytest.raises(SideApiError):
        call(judge)


def test_stream_without_end_marker(judge) -> None:
    judge.script(Reply("sse_no_done", '{"remember": true, "text": "回答问题时使用中文"}'))
    with pytest.raises(SideApiError, match="中断"):
        call(judge)


def test_server_that_never_answers_times_out(judge) -> None:
    judge.script(Reply("hang"))
    started = time.monotonic()
    with pytest.raises(SideApiError, match="超时"):
        call(judge, timeout=0.5)
    assert time.monotonic() - started < 3


def test_unreachable_server() -> None:
    with pytest.raises(SideApiError, match="请求失败"):
        chat("http://127.0.0.1:9/v1", "m", KEY, "s", "u", 2)


@pytest.mark.parametrize(
    "reply",
    [sse("长" * 4000), huge("json", 3 << 20), huge("sse", 3 << 20)],
    ids=["sse-past-limit", "announced-length", "endless-stream"],
)
def test_reading_stops_at_the_size_limit(judge, reply: Reply) -> None:
    judge.script(reply)
    with pytest.raises(ResponseTooLarge, match="超过 8192 字节"):
        chat(judge.url, "m1", KEY, "系统", "用户的话", 5.0, max_bytes=8192)


def test_default_limit_is_one_mib(judge) -> None:
    judge.script(huge("sse", 3 << 20), sse("长" * 30_000))
    with pytest.raises(ResponseTooLarge, match="超过 1 MiB"):
        call(judge)
    assert call(judge) == "长" * 30_000  # a long but sane answer still passes


def test_compressed_body_is_refused(judge) -> None:
    judge.script(Reply("gzip_json", "普通 JSON 回答"))
    with pytest.raises(SideApiError, match="压缩"):
        call(judge)


def test_parse_body_plain_json_without_content() -> None:
    assert parse_body('{"choices": []}') == ""
