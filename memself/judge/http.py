"""The judge's one HTTP call: OpenAI-compatible ``chat/completions`` over httpx (§4.6).

Not on the hook path (httpx). Errors become ``SideApiError`` with a Chinese message that never
contains the API key; the caller turns them into a job reason. Every text of a request is redacted
by ``request_body``, whoever wrote it: this is the one way out to the endpoint.
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx

from memself.errors import MemselfError
from memself.text.redact import redact

DEFAULT_TIMEOUT_S = 70.0
# A completion is a few hundred bytes of JSON, its SSE stream a few KiB. Reading an endpoint's
# answer whole, however long, let one huge response take a judge's memory with it.
MAX_RESPONSE_BYTES = 1 << 20
_ERROR_BODY_CHARS = 200


class SideApiError(MemselfError):
    """The judge API failed: status, transport, timeout, or an empty or broken body."""


class ResponseTooLarge(SideApiError):
    """The endpoint sent more than ``MAX_RESPONSE_BYTES``; reading stopped there."""


def endpoint(base: str) -> str:
    url = base.strip().rstrip("/")
    return url if url.endswith("/chat/completions") else url + "/chat/completions"


def request_body(model: str, system: str, user: str) -> dict[str, Any]:
    """The JSON body of one exchange, every message redacted.

    The prompt was redacted when its job was made, but a request also carries memory texts, and a
    memory keeps what the user typed (``memself rule add`` with a password in it). Redacting here,
    where every request is built, means no caller can forget; redacting a text twice changes
    nothing more, and the judge's own prompts pass unchanged.
    """
    return {
        "model": model,
        "stream": True,
        "messages": [
            {"role": "system", "content": redact(system)},
            {"role": "user", "content": redact(user)},
        ],
    }


def _scrub(text: str, api_key: str) -> str:
    return text.replace(api_key, "") if api_key else text


def _size_text(limit: int) -> str:
    return f"{limit >> 20} MiB" if limit >= 1 << 20 and not limit % (1 << 20) else f"{limit} 字节"


def chat(
    base: str,
    model: str,
    api_key: str,
    system: str,
    user: str,
    timeout: float = DEFAULT_TIMEOUT_S,
    *,
    max_bytes: int = MAX_RESPONSE_BYTES,
) -> str:
    """POST one system+user exchange and return the assistant's text.

    ``stream`` is requested, but both an SSE stream and a plain JSON body are accepted, since
    compatible servers differ. ``timeout`` bounds the whole call, not just each socket read, so
    a server that trickles bytes cannot hold a job past its deadline. At most ``max_bytes`` of
    body are read (``ResponseTooLarge`` past that), and only an uncompressed body is accepted:
    a small gzip body can expand a thousandfold before any count could stop it. No temperature
    is sent.
    """
    body = request_body(model, system, user)
    headers = {
        "Authorization": f"Bearer {api_key}",
        "Content-Type": "application/json",
        "Accept-Encoding": "identity",
    }
    deadline = time.monotonic() + timeout
    try:
        with (
            httpx.Client(timeout=httpx.Timeout(timeout), trust_env=False) as client,
            client.stream("POST", endpoint(base), json=body, headers=headers) as response,
        ):
            raw = _read_bounded(response, max_bytes, deadline, timeout).decode("utf-8", errors="replace")
            status = response.status_code
    except httpx.TimeoutException as exc:
        raise SideApiError(f"旁路接口超时（{timeout:g} 秒）") from exc
    except httpx.HTTPError as exc:
        # Transport messages may echo the URL but never the headers; scrub anyway.
        raise SideApiError(
            f"旁路接口请求失败：{_scrub(type(exc).__name__ + ' ' + str(exc), api_key)}"
        ) from exc
    if not 200 <= status < 300:
        raise SideApiError(f"旁路接口 {status}: {_scrub(raw, api_key)[:_ERROR_BODY_CHARS]}")
    content = parse_body(raw)
    if not content.strip():
        raise SideApiError("旁路接口没有正文")
    return content


def _read_bounded(response: httpx.Response, max_bytes: int, deadline: float, timeout: float) -> bytes:
    """The body as sent (transfer-decoded, never content-decoded), at most ``max_bytes``."""
    too_large = ResponseTooLarge(f"旁路接口的响应超过 {_size_text(max_bytes)}，已停止读取，不沉淀记忆")
    encoding = response.headers.get("content-encoding", "").strip().lower()
    if encoding not in ("", "identity"):
        raise SideApiError(f"旁路接口返回了压缩的响应（{encoding[:40]}），已拒绝读取")
    announced = response.headers.get("content-length", "").strip()
    if announced.isdigit() and int(announced) > max_bytes:
        raise too_large
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_raw():
        size += len(chunk)
        if size > max_bytes:
            raise too_large
        chunks.append(chunk)
        if time.monotonic() > deadline:
            raise SideApiError(f"旁路接口超时（{timeout:g} 秒）")
    return b"".join(chunks)


def parse_body(raw: str) -> str:
    """The assistant text of a plain JSON completion or of an SSE stream."""
    text = raw.strip()
    if not text:
        return ""
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise SideApiError("旁路接口返回的 JSON 无法解析") from exc
        return _message_content(data)
    return _sse_content(text)


def _message_content(data: Any) -> str:
    """The reply text of a parsed chat completion of any shape ("" when it is not there)."""
    try:
        content = data["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return ""
    return content if isinstance(content, str) else ""


def _sse_content(text: str) -> str:
    parts: list[str] = []
    complete = False
    # SSE lines end at CR LF, LF or CR only: str.splitlines() would also cut at NEL, U+2028 and
    # U+2029, which a server's JSON may leave unescaped inside a string.
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        line = line.strip()
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            complete = True
            break
        try:
            event = json.loads(payload)
        except ValueError as exc:
            raise SideApiError("旁路接口的流式响应无法解析") from exc
        try:
            choice = event["choices"][0]
        except (KeyError, IndexError, TypeError):
            continue
        delta = choice.get("delta") if isinstance(choice, dict) else None
        piece = delta.get("content") if isinstance(delta, dict) else None
        if isinstance(piece, str):
            parts.append(piece)
        if isinstance(choice, dict) and choice.get("finish_reason"):
            complete = True
    # A stream that ends without [DONE] or a finish_reason was cut off: half a JSON object
    # must not be judged as an answer.
    if not complete:
        raise SideApiError("旁路接口的流式响应中断")
    return "".join(parts)
