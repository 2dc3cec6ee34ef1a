"""A real OpenAI-compatible ``chat/completions`` server on 127.0.0.1 for the side judge's tests.

Each request takes the next scripted ``Reply``; every request body and header is recorded so
tests can assert what left the machine (the key only in the Authorization header, the prompt
redacted). Faults: HTTP errors, empty bodies, non-JSON, a stream cut halfway, a server that never
answers (hangs until the client's timeout, which tests keep short), and bodies of hundreds of MB
(a plain JSON body or an SSE stream, produced on the fly, never held in memory).
"""

from __future__ import annotations

import gzip
import itertools
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    # sse | json | gzip_json | status | empty | half | sse_no_done | hang | raw | huge_json | huge_sse
    kind: str
    content: str = ""
    status: int = 200
    size: int = 0  # huge_*: how many body bytes to send


def huge(kind: str, size: int) -> Reply:
    """A ``size``-byte body: ``"json"`` (one completion whose text never ends, Content-Length
    announced) or ``"sse"`` (chunked events that never finish)."""
    return Reply(f"huge_{kind}", size=size)


def sse(content: str) -> Reply:
    return Reply("sse", content)


def plain(content: str) -> Reply:
    return Reply("json", content)


_ABSENT = object()


def remember(
    text: str, group: str = "rule", evidence: str = "", when: object = _ABSENT, scope: object = _ABSENT
) -> str:
    """A remember answer; ``when`` (any JSON value, malformed ones too) becomes its appliesWhen,
    ``scope`` (likewise) its scope."""
    data: dict[str, object] = {"remember": True, "text": text, "group": group, "evidence": evidence}
    if when is not _ABSENT:
        data["appliesWhen"] = when
    if scope is not _ABSENT:
        data["scope"] = scope
    return json.dumps(data, ensure_ascii=False)


def not_memory() -> str:
    return json.dumps({"remember": False})


def dedup(action: str, mem_id: str = "", text: str = "", when: object = _ABSENT) -> str:
    data: dict[str, object] = {"action": action}
    if mem_id:
        data["id"] = mem_id
    if text:
        data["text"] = text
    if when is not _ABSENT:
        data["appliesWhen"] = when
    return json.dumps(data, ensure_ascii=False)


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    raw: str


@dataclass
class FakeJudge:
    replies: list[Reply] = field(default_factory=list)
    requests: list[Recorded] = field(default_factory=list)
    url: str = ""
    sent: list[int] = field(default_factory=list)  # body bytes each huge reply got out
    # With no scripted reply left: the reply computed from the request body, if set.
    responder: Callable[[dict[str, Any]], Reply] | None = None
    _release: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def script(self, *replies: Reply) -> None:
        with self._lock:
            self.replies[:] = list(replies)
            self.requests.clear()

    def next_reply(self, body: dict[str, Any] | None = None) -> Reply:
        with self._lock:
            if self.replies:
                return self.replies.pop(0)
        if self.responder is not None:
            return self.responder(body or {})
        return Reply("status", '{"error":"no scripted reply"}', 500)

    @property
    def user_messages(self) -> list[str]:
        return [
            m["content"] for r in self.requests for m in r.body.get("messages", []) if m.get("role") == "user"
        ]


def _chunks(content: str) -> list[dict[str, Any]]:
    pieces = [content[i : i + 7] for i in range(0, len(content), 7)] or [""]
    events: list[dict[str, Any]] = [{"choices": [{"index": 0, "delta": {"role": "assistant"}}]}]
    events += [{"choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]} for p in pieces]
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    return events


def _handler(judge: FakeJudge) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length).decode("utf-8")
            try:
                body = json.loads(raw)
            except ValueError:
                body = {}
            judge.requests.append(Recorded(self.path, dict(self.headers.items()), body, raw))
            reply = judge.next_reply(body)
            getattr(self, "_" + reply.kind)(reply)

        def _send(self, status: int, data: bytes, ctype: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _json(self, reply: Reply) -> None:
            data = {
                "id": "cmpl-1",
                "object": "chat.completion",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": reply.content},
                    }
                ],
            }
            self._send(200, json.dumps(data, ensure_ascii=False).encode(), "application/json")

        def _gzip_json(self, reply: Reply) -> None:
            data = {
                "id": "cmpl-1",
                "object": "chat.completion",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": reply.content},
                    }
                ],
            }
            body = gzip.compress(json.dumps(data, ensure_ascii=False).encode())
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _status(self, reply: Reply) -> None:
            self._send(reply.status, reply.content.encode(), "application/json")

        def _empty(self, reply: Reply) -> None:
            self._send(200, b"", "text/event-stream")

        def _raw(self, reply: Reply) -> None:
            self._send(reply.status, reply.content.encode(), "text/plain")

        def _sse_bytes(self, events: list[dict[str, Any]], done: bool) -> bytes:
            lines = [f"data: {json.dumps(e, ensure_ascii=False)}\n\n" for e in events]
            if done:
                lines.append("data: [DONE]\n\n")
            return "".join(lines).encode()

        def _stream_head(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def _sse(self, reply: Reply) -> None:
            self._stream_head()
            for event in _chunks(reply.content):
                self._chunk(self._sse_bytes([event], done=False))
            self._chunk(b"data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")

        def _half(self, reply: Reply) -> None:
            # Half of the events, then the connection drops without the final chunk.
            self._stream_head()
            events = _chunks(reply.content)
            for event in events[: max(1, len(events) // 2)]:
                self._chunk(self._sse_bytes([event], done=False))
            self.close_connection = True

        def _sse_no_done(self, reply: Reply) -> None:
            # A complete HTTP body whose SSE stream simply stops: no finish_reason, no [DONE].
            events = _chunks(reply.content)[:-1]
            self._send(
                200, self._sse_bytes(events[: max(1, len(events) // 2)], done=False), "text/event-stream"
            )

        def _hang(self, reply: Reply) -> None:
            judge._release.wait(30)

        def _huge_json(self, reply: Reply) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(reply.size))
            self.end_headers()
            head = b'{"choices":[{"index":0,"message":{"role":"assistant","content":"'
            self._stream(head, b"x" * 65536, reply.size, chunked=False)

        def _huge_sse(self, reply: Reply) -> None:
            self._stream_head()
            event = self._sse_bytes(
                [{"choices": [{"index": 0, "delta": {"content": "x" * 60}, "finish_reason": None}]}],
                done=False,
            )
            self._stream(b"", event * (65536 // len(event)), reply.size, chunked=True)

        def _stream(self, head: bytes, block: bytes, size: int, chunked: bool) -> None:
            sent = 0
            try:
                for data in itertools.chain([head], itertools.repeat(block)):
                    if sent >= size:
                        break
                    data = data[: size - sent]
                    if not data:
                        continue
                    if chunked:
                        self._chunk(data)
                    else:
                        self.wfile.write(data)
                    sent += len(data)
                if chunked:
                    self.wfile.write(b"0\r\n\r\n")
            except OSError:  # the client hung up: what a bounded reader does
                pass
            finally:
                judge.sent.append(sent)
                self.close_connection = True

    return Handler


@contextmanager
def running_judge() -> Iterator[FakeJudge]:
    """Start the server on a free port; ``judge.url`` is the ``sideApiBase`` to configure."""
    judge = FakeJudge()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(judge))
    server.daemon_threads = True
    judge.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield judge
    finally:
        judge._release.set()
        server.shutdown()
        server.server_close()
        thread.join(5)
