"""Before setup, with the model hub unreachable: a command that needs the model fails at once.

A new user who runs ``memself recall`` before ``memself setup`` (nothing prepared, the default
model on the hub) with no route to the hub used to wait for huggingface_hub's retries, 5 per file
with backoff, over a minute of English lines on stderr, before the Chinese error. Now one short
connect attempt decides it, and the one line says what to run.

The hub is a real socket on 127.0.0.1: either a closed port (connection refused) or a listener
that counts connections and resets each one (a hub that cannot be talked to). Real ``memself``
processes, fresh HOME and MEMSELF_HOME (conftest), an empty Hugging Face cache.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

# Only a safety net for the unfixed code (which retries for well over a minute); what the tests
# assert is the number of connection attempts and the output.
SAFETY_TIMEOUT_S = 150
ENGLISH_CHATTER = ("Retrying", "thrown while requesting", "Traceback", "Warning", "huggingface")

CASES = {
    "memories": [{"key": "r1", "group": "rule", "text": "回答一律用中文，代码注释也用中文。"}],
    "relevant": [{"prompt": "帮我解释这段代码", "expect": ["r1"]}],
    "irrelevant": [{"prompt": "今天天气怎么样"}],
}


class CountingHub:
    """A TCP listener that accepts and resets every connection, counting them."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.attempts = 0
        self._stop = False
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.attempts += 1
            # Linger 0: close sends a reset, as a dead or filtered hub's middlebox would.
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()

    def close(self) -> None:
        self._stop = True
        self.sock.close()


@pytest.fixture
def counting_hub() -> Iterator[CountingHub]:
    hub = CountingHub()
    try:
        yield hub
    finally:
        hub.close()


def closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_memself(args: list[str], endpoint: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "MEMSELF_MODEL_CACHE", "HF_HUB_CACHE"):
        env.pop(name, None)
    env.update(HF_ENDPOINT=endpoint, HF_HOME=str(home / "hf-home"), PYTHONUNBUFFERED="1")
    try:
        return subprocess.run(
            [sys.executable, "-m", "memself", *args],
            env=env,
            cwd=home,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=SAFETY_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else exc.stderr or ""
        pytest.fail(f"memself {' '.join(args)} still running after {SAFETY_TIMEOUT_S} s:\n{err[-2000:]}")


def commands(home: Path) -> dict[str, list[str]]:
    cases = home / "cases.json"
    cases.write_text(json.dumps(CASES, ensure_ascii=False), encoding="utf-8")
    return {
        "recall": ["recall", "你好"],
        "verify": ["verify", "--cases", str(cases)],
        "model-prepare": ["model", "prepare"],
    }


def assert_no_chatter(stderr: str) -> None:
    for word in ENGLISH_CHATTER:
        assert word not in stderr, stderr[-2000:]


@pytest.mark.parametrize("command", ["recall", "verify", "model-prepare"])
def test_one_connect_attempt_then_one_chinese_line(
    command: str, counting_hub: CountingHub, isolated_home: Path
) -> None:
    args = commands(isolated_home)[command]
    done = run_memself(args, f"http://127.0.0.1:{counting_hub.port}", isolated_home)
    assert counting_hub.attempts <= 1, (counting_hub.attempts, done.stderr[-2000:])
    assert done.returncode == 1, done.stdout + done.stderr
    assert_no_chatter(done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("错误："), done.stderr
    if command == "model-prepare":  # asked for the download itself: the ways to get the model
        assert "HF_ENDPOINT=" in lines[0] and "multilingual-e5-small" in lines[0]
    else:  # before setup: what to run
        assert "memself setup" in lines[0]


def test_closed_port_recall(isolated_home: Path) -> None:
    done = run_memself(["recall", "你好"], f"http://127.0.0.1:{closed_port()}", isolated_home)
    assert done.returncode == 1, done.stdout + done.stderr
    assert_no_chatter(done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "memself setup" in lines[0], done.stderr
    assert "127.0.0.1" in lines[0]  # the endpoint it could not reach
