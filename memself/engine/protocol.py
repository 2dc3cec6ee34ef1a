"""Wire format between the hook-side client and the engine: one length-prefixed JSON object each way.

A frame is a 4-byte big-endian length followed by that many bytes of UTF-8 JSON (an object).
Each connection carries exactly one request and one response, so a slow request never holds up
another client, and there is no session state to get wrong. One byte may follow the response the
other way: ``ACK``, the hook process's word that it wrote the answer to the host, after which the
engine rewards the memories recalled into it (a hook that gave up waiting never sends it).

Request:  {"v": 2, "op": str, "payload": dict, "version": str, "fingerprint": str,
           "wait_s": float (optional: how long a service op may wait for warm-up),
           "token": str (TCP fallback only)}
Response: {"ok": true, "result": dict} | {"ok": false, "error": <code>, "message": <Chinese text>}

Every op the engine answers is declared here, once. Standard library only: the hook process
imports this module. ``json`` is imported where used: the hook's fast path frames its one request
by hand and must not pay for json and re.
"""

import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # importing socket shows in the hook's start-up; only annotations need it
    from _socket import socket
    from typing import Any

# 2: a forwarded hook's stdin and stdout travel as hex (``bytes.hex``, a builtin) instead of base64,
# which cost the hook process loading the binascii extension.
PROTOCOL_VERSION = 2
HEADER_BYTES = 4
# The largest thing a hook sends is a forwarded stdin (at most 1 MiB, as hex); anything bigger is
# a bug or abuse.
MAX_REQUEST_BYTES = 3 << 20
# Replies are allowed more room than requests: a recall preview explains every group's line.
MAX_RESPONSE_BYTES = 4 << 20

# Ops the engine answers itself, whatever service it hosts.
OP_PING = "ping"
OP_STATUS = "status"
OP_STOP = "stop"
ENGINE_OPS = frozenset({OP_PING, OP_STATUS, OP_STOP})
# Ops of the recall service (memself.warm.service); the engine forwards them untouched.
# {text, now}: gated recall, nothing rewarded: the hook rewards what it delivered (its local run)
OP_RECALL = "recall"
OP_NEAREST = "nearest"  # {text, k}: the k nearest memories, ungated, no rewards (the judge)
OP_PREVIEW = "preview"  # {text}: recall with the gate's explanation, no rewards (``memself recall``)
# {host, stdinHex, env, home, started, utcoffset, zone}: a whole session-start or prompt hook from
# the raw stdin the hook process read (``memself.hook.process``), answered by ``memself.hook.run``
# with {stdoutHex} or {local: true}.
OP_HOOK_FORWARD = "hook-forward"
# {facts, sentences}: per fact its highest cosine with any sentence (whether an answer used it)
OP_SIMILARITY = "similarity"
SERVICE_OPS = frozenset({OP_RECALL, OP_NEAREST, OP_PREVIEW, OP_HOOK_FORWARD, OP_SIMILARITY})
# After a reply whose delivery matters: the client sends this byte once it handed the answer to
# the host; the engine waits for it this long, then drops what depended on it.
ACK = b"\x06"
ACK_WAIT_S = 2.0

# Error codes. Those below "client-side" never travel on the wire.
ERR_VERSION_MISMATCH = "version-mismatch"
ERR_NOT_READY = "not-ready"
ERR_WARM_UP_FAILED = "warm-up-failed"
ERR_TOO_LARGE = "too-large"
ERR_REFUSED = "refused"
ERR_BAD_REQUEST = "bad-request"
ERR_BUSY = "busy"
ERR_SERVICE = "service-error"
ERR_INTERNAL = "internal-error"
# client-side
ERR_UNREACHABLE = "unreachable"
ERR_TIMEOUT = "timeout"
ERR_PROTOCOL = "protocol"
ERR_UNSAFE_DIR = "unsafe-dir"
ERR_SPAWN = "spawn-failed"

MESSAGES = {
    ERR_VERSION_MISMATCH: "召回引擎的版本与当前安装不一致，正在重启",
    ERR_NOT_READY: "召回引擎正在加载模型，请稍后再试",
    ERR_WARM_UP_FAILED: "召回引擎加载模型失败",
    ERR_TOO_LARGE: "消息超过大小上限",
    ERR_REFUSED: "召回引擎拒绝了这次连接（用户或口令不符）",
    ERR_BAD_REQUEST: "召回引擎收到了格式不对的请求",
    ERR_BUSY: "召回引擎繁忙，请稍后再试",
    ERR_SERVICE: "召回引擎处理请求失败",
    ERR_INTERNAL: "召回引擎内部错误",
    ERR_UNREACHABLE: "召回引擎未运行",
    ERR_TIMEOUT: "召回引擎响应超时",
    ERR_PROTOCOL: "召回引擎的应答无法解析",
    ERR_UNSAFE_DIR: "召回引擎的运行目录权限不安全，已拒绝使用",
    ERR_SPAWN: "无法启动召回引擎",
}


class FrameError(Exception):
    """The wire failed: no connection, or a frame that cannot be read or written; ``code`` is one
    of the ERR_* codes."""

    def __init__(self, code: str, detail: str = "", *, message: str | None = None) -> None:
        super().__init__(detail or code)
        self.code = code
        self.message = message  # for the user (Chinese), when the code's own text says too little


def pack(message: "dict[str, Any]", limit: int) -> bytes:
    """Serialise one message with its length header; FrameError(too-large) past ``limit``."""
    body = encode(message, limit)
    return len(body).to_bytes(HEADER_BYTES, "big") + body


def encode(message: "dict[str, Any]", limit: int) -> bytes:
    """One message's body, without the header; FrameError(too-large) past ``limit``."""
    import json

    body = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    if len(body) > limit:
        raise FrameError(ERR_TOO_LARGE, f"{len(body)} > {limit} bytes")
    return body


def recv_exact(sock: "socket", size: int, deadline: float | None = None) -> bytes:
    """``size`` bytes from ``sock``. With a ``deadline`` (``time.monotonic()``) the whole read
    ends by then (TimeoutError), however the bytes trickle in; without one each recv has the
    socket's own timeout."""
    chunks: list[bytes] = []
    remaining = size
    while remaining:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            sock.settimeout(left)
        chunk = sock.recv(min(remaining, 1 << 16))
        if not chunk:
            raise FrameError(ERR_PROTOCOL, "connection closed mid-frame")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def read_header(sock: "socket", limit: int, deadline: float | None = None) -> int:
    """Read the length header; FrameError(too-large) before reading a body past ``limit``."""
    size = int.from_bytes(recv_exact(sock, HEADER_BYTES, deadline), "big")
    if size > limit:
        raise FrameError(ERR_TOO_LARGE, f"{size} > {limit} bytes")
    return size


def read_body(sock: "socket", size: int) -> "dict[str, Any]":
    """Read and decode a body of ``size`` bytes; it must be a JSON object."""
    return decode(recv_exact(sock, size))


def decode(body: bytes) -> "dict[str, Any]":
    """A frame's body as the JSON object it must be; FrameError(protocol) for anything else."""
    import json

    try:
        message = json.loads(body)
    except (UnicodeDecodeError, ValueError) as exc:
        raise FrameError(ERR_PROTOCOL, f"invalid JSON: {type(exc).__name__}") from None
    if not isinstance(message, dict):
        raise FrameError(ERR_PROTOCOL, "frame is not a JSON object")
    return message


def read_message(sock: "socket", limit: int) -> "dict[str, Any]":
    """Read one whole frame (header, then body) from ``sock``."""
    return read_body(sock, read_header(sock, limit))


# ---- the hook's fast path, without json: the same wire format, spelled by hand ------------------

# A successful hook-forward reply, as ``encode`` spells ``{"ok": true, "result": {"stdoutHex": HEX}}``.
FORWARD_REPLY_PREFIX = b'{"ok":true,"result":{"stdoutHex":"'
FORWARD_REPLY_SUFFIX = b'"}}'
# JSON string escapes for what str.translate must rewrite; lone surrogates (undecodable bytes in
# the environment) are escaped by the encoder's backslashreplace as \udcXX, also valid JSON.
_JSON_ESCAPES = {i: f"\\u{i:04x}" for i in range(0x20)}
_JSON_ESCAPES[ord('"')] = '\\"'
_JSON_ESCAPES[ord("\\")] = "\\\\"


def json_text(text: str) -> str:
    """``text`` as a JSON string literal."""
    return '"' + text.translate(_JSON_ESCAPES) + '"'


def forward_request(payload: str, wait_s: float, version: str, fingerprint: str) -> bytes:
    """A hook-forward request's body, as ``encode`` of the same request would read; ``payload``
    is the op's payload, already JSON text."""
    wait = f'"wait_s":{wait_s!r},' if wait_s else ""
    text = (
        f'{{"v":{PROTOCOL_VERSION},"op":"{OP_HOOK_FORWARD}","payload":{payload},{wait}'
        f'"version":{json_text(version)},"fingerprint":{json_text(fingerprint)}}}'
    )
    return text.encode("utf-8", errors="backslashreplace")


def with_token(body: bytes, token: str) -> bytes:
    """The request ``body`` carrying the TCP transport's token as its last field."""
    return body[:-1] + f',"token":{json_text(token)}}}'.encode("ascii")
