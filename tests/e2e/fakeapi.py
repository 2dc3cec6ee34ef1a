"""Fake model APIs on 127.0.0.1 that record every request: Anthropic Messages and OpenAI chat.

Standard library only (the driver runs it inside a network namespace with ``python -I``).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Recorder:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []
        self.replies = 0
        self.rules: list[dict[str, Any]] = []  # scripted replies (match_rule); none by default

    def add(self, method: str, path: str, body: bytes) -> int:
        try:
            parsed: Any = json.loads(body) if body else None
        except ValueError:
            parsed = body.decode("utf-8", "replace")
        with self.lock:
            self.requests.append({"method": method, "path": path, "body": parsed, "t": time.time()})
            return len(self.requests)

    def next_reply(self) -> int:
        with self.lock:
            self.replies += 1
            return self.replies


def _sse(events: list[tuple[str | None, dict[str, Any] | str]]) -> bytes:
    out = []
    for name, data in events:
        payload = data if isinstance(data, str) else json.dumps(data)
        out.append((f"event: {name}\n" if name else "") + f"data: {payload}\n\n")
    return "".join(out).encode()


def _anthropic_events(
    block: dict[str, Any], delta: dict[str, Any], stop_reason: str, model: str, n: int
) -> bytes:
    """One streamed Anthropic message holding one content block."""
    usage = {
        "input_tokens": 12,
        "output_tokens": 1,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    return _sse(
        [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": f"msg_fake_{n}",
                        "type": "message",
                        "role": "assistant",
                        "model": model,
                        "content": [],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": usage,
                    },
                },
            ),
            ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                    "usage": {"output_tokens": 5},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
    )


def anthropic_stream(text: str, model: str, n: int) -> bytes:
    return _anthropic_events(
        {"type": "text", "text": ""}, {"type": "text_delta", "text": text}, "end_turn", model, n
    )


def anthropic_message(text: str, model: str, n: int) -> dict[str, Any]:
    return {
        "id": f"msg_fake_{n}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 5},
    }


def openai_stream(text: str, model: str, n: int) -> bytes:
    base = {"id": f"chatcmpl-fake-{n}", "object": "chat.completion.chunk", "created": 0, "model": model}
    return _sse(
        [
            (
                None,
                {
                    **base,
                    "choices": [
                        {"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": None}
                    ],
                },
            ),
            (
                None,
                {
                    **base,
                    "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
                },
            ),
            (None, "[DONE]"),
        ]
    )


def openai_message(text: str, model: str, n: int) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-fake-{n}",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
    }


def anthropic_tool_stream(name: str, tool_input: dict[str, Any], model: str, n: int) -> bytes:
    return _anthropic_events(
        {"type": "tool_use", "id": f"toolu_fake_{n}", "name": name, "input": {}},
        {"type": "input_json_delta", "partial_json": json.dumps(tool_input, ensure_ascii=False)},
        "tool_use",
        model,
        n,
    )


def match_rule(rules: list[dict[str, Any]], path: str, body: Any) -> dict[str, Any] | None:
    """The first scripted rule for this request, with ``{name}`` captures filled into its input.

    A rule: ``path`` (suffix), ``scope`` (``body`` or ``last_message``), ``contains`` and
    ``excludes`` (substrings), optional ``capture`` {field: regex with one group}, and the reply:
    ``text`` or ``tool_use`` {name, input}. Without rules the server answers "OK" as before.
    """
    import re

    for rule in rules:
        if not path.endswith(rule.get("path", "")):
            continue
        target: Any = body
        if rule.get("scope") == "last_message" and isinstance(body, dict) and body.get("messages"):
            target = body["messages"][-1]
        text = json.dumps(target, ensure_ascii=False)
        if not all(c in text for c in rule.get("contains", [])):
            continue
        if any(c in text for c in rule.get("excludes", [])):
            continue
        captured: dict[str, str] = {}
        for field, pattern in rule.get("capture", {}).items():
            found = re.search(pattern, text)
            if found is None:
                break
            captured[field] = found.group(1)
        else:
            out = dict(rule)
            if "tool_use" in rule:
                tool_input = {k: captured.get(k, v) for k, v in rule["tool_use"]["input"].items()}
                out["tool_use"] = {"name": rule["tool_use"]["name"], "input": tool_input}
            return out
    return None


def make_handler(recorder: Recorder) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _body(self) -> bytes:
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length else b""

        def _send(self, status: int, data: bytes, ctype: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        def _json(self, value: Any, status: int = 200) -> None:
            self._send(status, json.dumps(value).encode(), "application/json")

        def do_HEAD(self) -> None:
            recorder.add("HEAD", self.path, b"")
            self._json({})

        def do_GET(self) -> None:
            recorder.add("GET", self.path, b"")
            path = self.path.split("?")[0]
            if path.endswith("/models"):
                self._json(
                    {
                        "object": "list",
                        "has_more": False,
                        "first_id": "fake-model",
                        "last_id": "fake-model",
                        "data": [
                            {
                                "type": "model",
                                "id": "fake-model",
                                "object": "model",
                                "display_name": "Fake",
                                "created_at": "2026-01-01T00:00:00Z",
                            }
                        ],
                    }
                )
            else:
                self._json({})

        def do_POST(self) -> None:
            raw = self._body()
            recorder.add("POST", self.path, raw)
            path = self.path.split("?")[0]
            try:
                body = json.loads(raw) if raw else {}
            except ValueError:
                body = {}
            model = str(body.get("model") or "fake-model") if isinstance(body, dict) else "x"
            stream = isinstance(body, dict) and body.get("stream") is True
            if path.endswith("/messages/count_tokens"):
                self._json({"input_tokens": 42})
            elif path.endswith("/messages"):
                n = recorder.next_reply()
                rule = match_rule(recorder.rules, path, body)
                text = rule["text"] if rule and "text" in rule else f"OK (fake reply #{n})"
                if rule and "tool_use" in rule and stream:
                    tool = rule["tool_use"]
                    self._send(
                        200, anthropic_tool_stream(tool["name"], tool["input"], model, n), "text/event-stream"
                    )
                elif stream:
                    self._send(200, anthropic_stream(text, model, n), "text/event-stream")
                else:
                    self._json(anthropic_message(text, model, n))
            elif path.endswith("/chat/completions"):
                n = recorder.next_reply()
                rule = match_rule(recorder.rules, path, body)
                text = rule["text"] if rule and "text" in rule else f"OK (fake reply #{n})"
                if stream:
                    self._send(200, openai_stream(text, model, n), "text/event-stream")
                else:
                    self._json(openai_message(text, model, n))
            else:
                self._json({})

    return Handler


class FakeAPI:
    """One server for both protocols (paths differ); ``base`` is ``http://127.0.0.1:<port>``."""

    def __init__(self, rules: list[dict[str, Any]] | None = None) -> None:
        self.recorder = Recorder()
        self.recorder.rules = list(rules or [])
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(self.recorder))
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> FakeAPI:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
