"""``memself setup`` in a real pseudo-terminal: the README's questions, typed one at a time,
the key never echoed, the answers written, the permission added. Slow: it loads the real
offline model, as setup does."""

from __future__ import annotations

import json
import os
import pty
import select
import stat
import time
from pathlib import Path

import pytest

from memself.paths import DataPaths
from tests.support import foreign

# A pseudo-terminal is POSIX's (pty.fork); Windows' console is another thing, never run here.
pytestmark = pytest.mark.skipif(foreign.active(), reason="POSIX pseudo-terminals only")

KEY = "sk-typed-secret-5d2c"
ANSWERS = [
    ("[1/2]", "2"),
    ("baseUrl", "https://judge.example/v1"),
    ("apiKey", KEY),
    ("apiModel", "judge-m"),
    ("免批准", "y"),
]


def drive(argv: list[str], answers: list[tuple[str, str]], timeout: float = 600) -> tuple[int, str]:
    pid, fd = pty.fork()
    if pid == 0:  # the child: a terminal on stdin/stdout, as a user's shell gives it
        os.execv(argv[0], argv)
    pending, seen, output = list(answers), b"", b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 5)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
        output += chunk
        if pending and pending[0][0].encode() in seen:
            time.sleep(0.2)  # a hidden prompt flushes input typed before it appears
            os.write(fd, pending.pop(0)[1].encode() + b"\r")
            seen = b""
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), output.decode("utf-8", errors="replace")


def test_interactive_setup_in_a_terminal(isolated_home: Path, model_cache: Path) -> None:
    home = isolated_home
    (home / ".claude").mkdir()
    paths = DataPaths.default()
    paths.ensure()
    paths.config.write_text('{"model": "multilingual-e5-small"}\n')
    memself = Path(os.environ.get("VIRTUAL_ENV", Path(__file__).parents[1] / ".venv")) / "bin"
    code, output = drive([str(memself / "memself"), "setup"], ANSWERS)
    assert code == 0, output
    assert KEY not in output
    for question in ("弹出确认", "baseUrl", "apiKey", "apiModel", "免批准"):
        assert question in output
    assert json.loads(paths.config.read_text()) == {
        "model": "multilingual-e5-small",
        "confirm": False,
        "sideApiBase": "https://judge.example/v1",
        "sideApiModel": "judge-m",
    }
    assert json.loads(paths.side_secret.read_text()) == {
        "apiKey": KEY,
        "boundApiBase": "https://judge.example/v1",
    }
    assert stat.S_IMODE(paths.side_secret.stat().st_mode) == 0o600
    settings = json.loads((home / ".claude/settings.json").read_text())
    assert settings["permissions"]["allow"] == ["mcp__memory-self-evolution__memory_resolve"]
    assert "向量模型就绪：multilingual-e5-small" in output


def test_key_set_reads_a_hidden_prompt(isolated_home: Path) -> None:
    paths = DataPaths.default()
    paths.ensure()
    paths.config.write_text('{"sideApiBase": "https://judge.example/v1"}\n')
    memself = Path(os.environ.get("VIRTUAL_ENV", Path(__file__).parents[1] / ".venv")) / "bin"
    code, output = drive([str(memself / "memself"), "key", "set"], [("apiKey", KEY)], timeout=60)
    assert code == 0, output
    assert KEY not in output and "只会发往 https://judge.example/v1" in output
    assert json.loads(paths.side_secret.read_text()) == {
        "apiKey": KEY,
        "boundApiBase": "https://judge.example/v1",
    }
