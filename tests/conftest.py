"""Every test gets a fresh fake HOME and MEMSELF_HOME; touching the real home fails the test."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import foreign

pytest_plugins = ["tests.support.model_fixtures"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        foreign.OPTION,
        action="store_true",
        help="run with Windows' rules where Linux allows (also: MEMSELF_FOREIGN_PLATFORM=1)",
    )


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption(foreign.OPTION) or foreign.active():
        foreign.enable()


REAL_HOME = Path(os.path.expanduser("~")).resolve()
REPO_ROOT = Path(__file__).resolve().parent.parent
_HOST_DIRS = (
    ".memory-self-evolution",
    ".claude",
    ".claude.json",
    ".cursor",
    ".codebuddy",
    ".workbuddy",
    ".codebuddy.json",
)
_violations: list[str] = []
_guard_active = False


def _is_under_real_home(path: str) -> bool:
    try:
        resolved = Path(path).resolve()
    except (OSError, ValueError):
        return False
    if resolved == REAL_HOME:
        return False
    try:
        rel = resolved.relative_to(REAL_HOME)
    except ValueError:
        return False
    # Caches of pip, npm and the model hub are fine to read and write; our files and the hosts' are not.
    return rel.parts[0] in _HOST_DIRS if rel.parts else False


def _audit(event: str, args: tuple) -> None:
    if not _guard_active:
        return
    if event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):
        path = os.fsdecode(args[0])
        mode = args[1] if len(args) > 1 else "r"
        flags = args[2] if len(args) > 2 else 0
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)
        )
        if _is_under_real_home(path):
            _violations.append(f"{'write' if writing else 'read'} {path}")
    elif event in {"os.mkdir", "os.rename", "os.remove", "os.rmdir", "os.chmod"} and args:
        path = os.fsdecode(args[0]) if isinstance(args[0], (str, bytes, os.PathLike)) else ""
        if path and _is_under_real_home(path):
            _violations.append(f"{event} {path}")


sys.addaudithook(_audit)


def _real_home_stamp() -> dict[str, float | None]:
    stamp: dict[str, float | None] = {}
    for name in _HOST_DIRS:
        path = REAL_HOME / name
        stamp[name] = path.stat().st_mtime if path.exists() else None
    return stamp


def _stop_engine_left_running() -> None:
    """An engine that a test's CLI call or hook started (``engine status``, ``doctor``, a hook
    process) would otherwise serve its temporary data directory until its idle exit, long after
    the suite. Asked to stop first; then any engine process still naming this data directory (one
    that was on its way to the lock while the first stopped) is ended."""
    from memself.engine import instance_lock
    from memself.engine.location import locate
    from memself.paths import DataPaths

    data = DataPaths.default()
    lock_path = locate(data.root).lock_path if data.root.is_dir() else ""
    if not lock_path or not os.path.exists(lock_path):
        return  # no engine ever started here
    if instance_lock.is_held(lock_path):
        from memself.engine.client import stop_engine

        try:
            stop_engine(data, timeout_s=5.0)
        except Exception as exc:  # reported, not raised: the test itself already passed or failed
            print(f"engine left running in {data.root} not stopped: {exc}", file=sys.stderr)
    for pid in _engine_processes(str(data.root)):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def _engine_processes(data_dir: str) -> list[int]:
    """Engine processes serving ``data_dir``, where the system lists command lines (Linux)."""
    found = []
    proc = Path("/proc")
    for entry in proc.iterdir() if proc.is_dir() else []:
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"memself.warm" in argv and data_dir.encode() in argv:
            found.append(int(entry.name))
    return found


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh fake HOME and MEMSELF_HOME for every test; fail if the real home was touched."""
    global _guard_active
    # The foreign mode's home has a space and Chinese characters, as a Windows user's often has.
    home = tmp_path / foreign.HOME_PARENT / "home" if foreign.active() else tmp_path / "home"
    home.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("MEMSELF_HOME", str(home / ".memory-self-evolution"))
    # No delayed background run outlives its test (tests that want one switch it back on).
    monkeypatch.setenv("MEMSELF_VIEWS_BACKGROUND", "0")
    # Nor a Stop-side check of an answer (tests that test it switch it back on).
    monkeypatch.setenv("MEMSELF_KEPT", "0")
    monkeypatch.setenv("USERPROFILE", str(home))
    for var in (
        "CURSOR_VERSION",
        "CLAUDECODE",
        "CLAUDE_CODE_SESSION_ID",
        "CODEBUDDY_PROJECT_DIR",
        "MEMORY_CLAUDE_BIN",
        "HF_ENDPOINT",
    ):
        monkeypatch.delenv(var, raising=False)
    before = _real_home_stamp()
    _violations.clear()
    _guard_active = True
    try:
        yield home
    finally:
        _guard_active = False
        _stop_engine_left_running()
    after = _real_home_stamp()
    touched = [name for name in _HOST_DIRS if before[name] != after[name]]
    problems = list(_violations) + [f"mtime changed: {REAL_HOME / n}" for n in touched]
    _violations.clear()
    if problems:
        pytest.fail("test touched the real home directory: " + "; ".join(problems[:5]))
