"""The platform layer: the one place that tests the operating system, and each of its branches.

The Windows branches run here through ``MEMSELF_FOREIGN_PLATFORM=1`` (set per test with
monkeypatch: ``memself.platform`` reads it on every call). What only Windows itself can show
(``msvcrt``, ``creationflags``, ACLs) is checked against the documented values.
"""

from __future__ import annotations

import ast
import errno
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memself.engine import instance_lock
from memself.engine.location import locate
from memself.errors import LockBroken
from memself.judge import runlock
from memself.paths import DataPaths
from memself.platform import children, files, locks, processes, sockets, system
from memself.platform.system import FOREIGN_ENV
from memself.store.lock import KERNEL_LOCK_NAME, write_lock
from tests.support.helpers import T0, make_store

REPO_ROOT = Path(__file__).resolve().parent.parent
BRANCHES = ["posix", "windows"]


@pytest.fixture(params=BRANCHES)
def branch(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "windows":
        if not system.real_windows():
            monkeypatch.setenv(FOREIGN_ENV, "1")
    elif os.environ.get(FOREIGN_ENV) == "1" or system.real_windows():
        pytest.skip("no POSIX branch here")
    return str(request.param)


# -- one place ----------------------------------------------------------------------------------

_OS_TESTS = re.compile(r"\bfcntl\b|\bmsvcrt\b|\bsys\.platform\b")
# Names Python on Windows lacks (os.fchmod until 3.13) or that mean nothing there.
_POSIX_ONLY = re.compile(
    r"\bos\.fork\b|\bos\.setsid\b|start_new_session|\bAF_UNIX\b|\bSO_PEERCRED\b|\bos\.p(read|write)\b"
    r"|\bos\.(fchmod|fchown|chown|lchown|killpg|getpgid|getpgrp|setpgrp|statvfs|uname|mkfifo)\b"
    r"|\bos\.sync\b|\bos\.WNOHANG\b"
    r"|\bsignal\.(SIGKILL|SIGHUP|SIGUSR1|SIGUSR2|SIGALRM|SIGCHLD|alarm|setitimer)\b"
)


def _sources() -> list[tuple[str, str]]:
    found = []
    for path in sorted((REPO_ROOT / "memself").rglob("*.py")):
        rel = path.relative_to(REPO_ROOT).as_posix()
        if rel.startswith("memself/platform/"):
            continue
        found.append((rel, path.read_text(encoding="utf-8")))
    return found


def test_no_module_outside_the_platform_layer_tests_the_system() -> None:
    offenders = [
        f"{rel}:{number}: {line.strip()}"
        for rel, text in _sources()
        for number, line in enumerate(text.splitlines(), 1)
        if _OS_TESTS.search(line) or _POSIX_ONLY.search(line)
    ]
    assert offenders == []


def test_the_grep_sees_what_it_forbids() -> None:
    assert _OS_TESTS.search("    import fcntl") and _OS_TESTS.search('if sys.platform == "win32":')
    assert _POSIX_ONLY.search("os.setsid()") and _POSIX_ONLY.search("os.pread(fd, 1, 0)")
    assert _POSIX_ONLY.search("os.fchmod(fd, 0o600)") and _POSIX_ONLY.search("os.kill(pid, signal.SIGKILL)")
    assert not _OS_TESTS.search("from memself.platform import locks")


def test_the_foreign_mode_is_windows_on_linux(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FOREIGN_ENV, "1")
    assert system.windows() and system.foreign() and not system.real_windows()
    assert system.name() == "windows"
    assert not sockets.unix_sockets() and not locks.inherited() and files.own_uid() is None
    assert not children.posix_spawn_detached()
    monkeypatch.setenv(FOREIGN_ENV, "0")
    assert not system.windows() and system.name() in ("linux", "macos")


# -- locks --------------------------------------------------------------------------------------


def test_a_lock_excludes_another_open_file_and_goes_with_the_close(branch: str, tmp_path: Path) -> None:
    path = tmp_path / "a.lock"
    first = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    second = os.open(path, os.O_RDWR)
    try:
        assert locks.try_exclusive(first)
        assert not locks.try_exclusive(second)
        assert locks.held_elsewhere(second)
        os.close(first)
        assert not locks.held_elsewhere(second)
        assert locks.try_exclusive(second)
    finally:
        os.close(second)


def test_a_killed_holder_loses_its_lock(branch: str, tmp_path: Path) -> None:
    path = tmp_path / "b.lock"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import os, sys, time; from memself.platform import locks\n"
            "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
            "assert locks.try_exclusive(fd); print('held', flush=True); time.sleep(60)",
            str(path),
        ],
        stdout=subprocess.PIPE,
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        assert instance_lock.is_held(str(path))
        holder.kill()
        holder.wait(10)
        assert not instance_lock.is_held(str(path))
    finally:
        holder.kill()
        holder.wait(10)


def test_windows_slots_are_independent_and_leave_the_content_readable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Windows' locks are mandatory: the locked byte lies past the content (the pid)."""
    monkeypatch.setenv(FOREIGN_ENV, "1")
    path = tmp_path / "c.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    other = os.open(path, os.O_RDWR)
    try:
        assert locks.try_exclusive(fd, 0)
        assert locks.try_exclusive(other, 1)
        assert not locks.try_exclusive(other, 0) and not locks.try_exclusive(fd, 1)
        instance_lock.write_owner(fd, 4242)
        assert instance_lock.read_owner(str(path)) == 4242
        locks.unlock(fd, 0)
        assert locks.try_exclusive(other, 0)
    finally:
        os.close(fd)
        os.close(other)


def test_a_file_system_without_locks_fails_the_write_naming_the_path(
    branch: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A network drive that refuses locks (ENOLCK) cannot be had on this machine; the refusal is
    injected at the lock call, everything around it is real."""
    store = make_store()
    store.add("回答一律用中文", "rule", T0)
    before = store.paths.group_file("rule").read_bytes()

    def no_locks(fd: int, slot: int = 0) -> bool:
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(locks, "try_exclusive", no_locks)
    with pytest.raises(LockBroken) as failure:
        store.add("改完不要自动 commit", "rule", T0)
    message = str(failure.value)
    assert str(store.paths.root / KERNEL_LOCK_NAME) in message and "网络盘" in message
    assert "MEMSELF_HOME" in message
    assert store.paths.group_file("rule").read_bytes() == before
    with pytest.raises(LockBroken):
        with write_lock(store.paths, wait_s=0.2):
            pass


# -- atomic replace on Windows -------------------------------------------------------------------


def _flaky_replace(monkeypatch: pytest.MonkeyPatch, failures: int) -> list[int]:
    real = os.replace
    calls = [0]

    def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        calls[0] += 1
        if calls[0] <= failures:
            # What Windows says while a scanner holds the target open (ERROR_ACCESS_DENIED).
            raise PermissionError(errno.EACCES, "Access is denied", os.fspath(dst))
        real(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    return calls


_APPENDER = """
import os, sys
from memself.platform import files
path, tag = sys.argv[1], sys.argv[2]
for i in range(int(sys.argv[3])):
    files.append_whole(path, f"{tag} {i:04d} {'x' * 300}\\n".encode())
"""


def test_appends_from_several_processes_at_once_all_land_whole(branch: str, tmp_path: Path) -> None:
    # Windows' C runtime appends by a seek to the end and then a write; the Windows branch seeks
    # and writes the same way, so here too two writers can meet at one offset.
    path = tmp_path / "shared.log"
    writers, lines = 4, 400
    procs = [
        subprocess.Popen([sys.executable, "-c", _APPENDER, str(path), f"w{k}", str(lines)], cwd=REPO_ROOT)
        for k in range(writers)
    ]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    got = path.read_bytes().split(b"\n")
    assert got[-1] == b""
    expected = {f"w{k} {i:04d} {'x' * 300}".encode() for k in range(writers) for i in range(lines)}
    assert len(got) - 1 == writers * lines and set(got[:-1]) == expected


def test_an_append_that_must_not_follow_links_refuses_one_and_keeps_the_target(
    branch: str, tmp_path: Path
) -> None:
    if not files.NOFOLLOW:  # real Windows: share refuses a link by lstat before it appends
        pytest.skip("this system has no O_NOFOLLOW")
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"mine\n")
    link = tmp_path / "team.jsonl"
    os.symlink(victim, link)
    with pytest.raises(OSError):
        files.append_whole(link, b"planted\n", 0o644, follow=False, durable=True)
    assert victim.read_bytes() == b"mine\n"
    files.append_whole(tmp_path / "plain.jsonl", b"a\n", 0o644, follow=False, durable=True)
    files.append_whole(tmp_path / "plain.jsonl", b"b\n", 0o644, follow=False, durable=True)
    assert (tmp_path / "plain.jsonl").read_bytes() == b"a\nb\n"


def test_a_replace_blocked_for_a_moment_is_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FOREIGN_ENV, "1")
    store = make_store()
    store.add("回答一律用中文", "rule", T0)
    calls = _flaky_replace(monkeypatch, 3)
    store.add("改完不要自动 commit", "rule", T0)
    assert calls[0] >= 4
    assert "改完不要自动 commit" in store.paths.group_file("rule").read_text(encoding="utf-8")


def test_a_replace_blocked_for_good_fails_clearly_and_keeps_the_old_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from memself.atomic import write_atomic

    monkeypatch.setenv(FOREIGN_ENV, "1")
    monkeypatch.setattr(files, "REPLACE_RETRY_S", 0.3)
    folder = tmp_path / "data"
    folder.mkdir()
    target = folder / "config.json"
    target.write_text('{"old": true}\n', encoding="utf-8")
    _flaky_replace(monkeypatch, 10**6)
    started = time.monotonic()
    with pytest.raises(files.ReplaceBlocked) as failure:
        write_atomic(target, '{"new": true}\n')
    assert time.monotonic() - started < 5
    assert str(target) in str(failure.value) and "原文件没有改动" in str(failure.value)
    assert target.read_text(encoding="utf-8") == '{"old": true}\n'
    assert sorted(p.name for p in folder.iterdir()) == ["config.json"]  # no temp file left


def test_posix_replace_is_not_retried(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    if system.windows():
        pytest.skip("the POSIX branch is hidden in the foreign-platform mode")
    calls = _flaky_replace(monkeypatch, 1)
    (tmp_path / "a").write_text("a")
    with pytest.raises(PermissionError):
        files.replace(tmp_path / "a", tmp_path / "b")
    assert calls[0] == 1


# -- children, processes, signals -----------------------------------------------------------------


@pytest.mark.skipif(system.real_windows(), reason="switches between Linux and the foreign mode")
def test_detached_children_per_system(monkeypatch: pytest.MonkeyPatch) -> None:
    # Windows' documented values (subprocess defines these names on Windows only).
    assert children.DETACHED_PROCESS == 0x00000008
    assert children.CREATE_NEW_PROCESS_GROUP == 0x00000200
    assert children.CREATE_NO_WINDOW == 0x08000000
    for name in ("DETACHED_PROCESS", "CREATE_NEW_PROCESS_GROUP", "CREATE_NO_WINDOW"):
        if hasattr(subprocess, name):
            assert getattr(subprocess, name) == getattr(children, name)
    monkeypatch.setenv(FOREIGN_ENV, "1")
    assert children.popen_detached() == {}  # Linux refuses Windows' flags
    monkeypatch.setattr(system, "_REAL_WINDOWS", True)
    assert children.popen_detached() == {"creationflags": children.WINDOWS_DETACH_FLAGS}
    monkeypatch.setattr(system, "_REAL_WINDOWS", False)
    monkeypatch.setenv(FOREIGN_ENV, "0")
    assert children.popen_detached() == {"start_new_session": True}


@pytest.mark.skipif(system.real_windows(), reason="switches between Linux and the foreign mode")
@pytest.mark.parametrize("console", [True, False])
def test_console_programs_get_no_window_where_nobody_would_see_it(
    console: bool, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A console program started by a process without a console (the detached engine, the
    # background sync) would get a new, visible console window on Windows.
    from memself.sync.gitrepo import Repo

    monkeypatch.setattr(system, "_REAL_WINDOWS", True)
    monkeypatch.setattr(children, "_has_console", lambda: console)
    group = children.CREATE_NEW_PROCESS_GROUP | (0 if console else children.CREATE_NO_WINDOW)
    assert children.popen_own_group() == {"creationflags": group}
    assert children.piped() == {"creationflags": children.CREATE_NO_WINDOW}
    seen: list[dict[str, object]] = []

    def fake_run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[bytes]:
        seen.append(kwargs)
        return subprocess.CompletedProcess(argv, 0, b"", b"")

    monkeypatch.setattr(subprocess, "run", fake_run)
    Repo(tmp_path).run("status")
    assert seen[0]["creationflags"] == children.CREATE_NO_WINDOW
    monkeypatch.setattr(system, "_REAL_WINDOWS", False)
    assert children.piped() == {}


def test_windows_children_are_waited_for_through_popen(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from memself import children as reaper

    monkeypatch.setenv(FOREIGN_ENV, "1")
    monkeypatch.setattr(reaper, "_PENDING", {})
    monkeypatch.setattr(reaper, "_enabled", True)
    gate = tmp_path / "go"
    code = f"import os, time\nwhile not os.path.exists({str(gate)!r}): time.sleep(0.02)"
    pid = children.spawn_detached([sys.executable, "-c", code], dict(os.environ))
    reaper.track(pid)
    assert reaper.reap() == 1  # running: kept
    gate.touch()
    deadline = time.monotonic() + 20
    while reaper.reap() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert reaper.reap() == 0 and pid not in children._POPENS


def test_pid_alive_never_signals(monkeypatch: pytest.MonkeyPatch) -> None:
    assert processes.pid_alive(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert not processes.pid_alive(child.pid) and not processes.pid_alive(0)


def test_shutdown_signals_per_system(monkeypatch: pytest.MonkeyPatch) -> None:
    from memself.platform import signals

    monkeypatch.setenv(FOREIGN_ENV, "1")
    assert signals.shutdown_signal_names()[0] == "SIGTERM"
    assert "SIGHUP" not in signals.shutdown_signal_names()
    assert not signals.alarm_available(signal)


# -- the judge's death signal without inherited locks ----------------------------------------------


def _judge_holding(paths: DataPaths, sid: str) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from memself.judge import runlock; from memself.paths import DataPaths\n"
            "runlock.hold_as_judge(DataPaths(sys.argv[1]), sys.argv[2]); print('held', flush=True)\n"
            "time.sleep(60)",
            str(paths.root),
            sid,
        ],
        stdout=subprocess.PIPE,
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    assert process.stdout is not None and process.stdout.readline() == b"held\n"
    return process


def test_run_lock_without_inheritance_tells_a_dead_judge(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FOREIGN_ENV, "1")
    paths = make_store().paths
    paths.side_dir.mkdir(mode=0o700, exist_ok=True)
    sid = "s_" + "1" * 64
    assert runlock.probe(paths, sid) == runlock.UNKNOWN
    hook = runlock.take(paths, sid)
    assert hook is not None
    assert runlock.take(paths, sid) is None  # a retry of this very turn
    assert runlock.probe(paths, sid) == runlock.ALIVE
    judge = _judge_holding(paths, sid)
    try:
        os.close(hook)  # the hook exits; the judge's own lock speaks for it now
        assert runlock.probe(paths, sid) == runlock.ALIVE
        judge.kill()
        judge.wait(10)
        assert runlock.probe(paths, sid) == runlock.DEAD  # it had started: dead at once
    finally:
        judge.kill()
        judge.wait(10)


def test_run_lock_of_a_judge_that_never_started(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FOREIGN_ENV, "1")
    paths = make_store().paths
    paths.side_dir.mkdir(mode=0o700, exist_ok=True)
    sid = "s_" + "2" * 64
    hook = runlock.take(paths, sid)
    assert hook is not None
    os.close(hook)
    assert runlock.probe(paths, sid) == runlock.ALIVE  # still within its start-up grace
    old = time.time() - runlock.START_GRACE_S - 1
    os.utime(runlock.run_lock_path(paths, sid), (old, old))
    assert runlock.probe(paths, sid) == runlock.DEAD


# -- the engine's TCP transport ------------------------------------------------------------------


def _port_file(paths: DataPaths, port: int, mode: int = 0o600, pid: int = 1) -> Path:
    from memself.engine.transport import format_port_file

    path = Path(locate(paths.root).port_file)
    paths.ensure()
    path.write_text(format_port_file(port, "t" * 43, pid), encoding="utf-8")
    os.chmod(path, mode)
    return path


def _loopback_listener() -> socket.socket:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    return listener


def test_a_port_taken_by_another_program_sees_no_request(monkeypatch: pytest.MonkeyPatch) -> None:
    from memself.doctor import check_engine_port
    from memself.engine.client import EngineClient, EngineRequestError

    monkeypatch.setenv(FOREIGN_ENV, "1")
    paths = make_store().paths
    stranger = _loopback_listener()
    stranger.settimeout(5)
    port = stranger.getsockname()[1]
    _port_file(paths, port)
    received: list[bytes] = []

    import threading

    def serve() -> None:
        for _ in range(2):
            try:
                conn, _ = stranger.accept()
            except OSError:
                return
            conn.settimeout(2)
            data = b""
            try:
                while chunk := conn.recv(65536):
                    data += chunk
                    conn.sendall(b"\0" * 32)  # answers something, not the proof
            except OSError:
                pass
            received.append(data)
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        with pytest.raises(EngineRequestError) as failure:
            EngineClient(paths).request("echo", {"secret": "支付页灰度开关是 pay_new_flow"}, 2.0)
        assert failure.value.code == "unreachable"
        assert str(port) in str(failure.value) and "别的程序" in str(failure.value)
        check = check_engine_port(paths)
        assert check is not None and check.ok is False and str(port) in check.summary
    finally:
        stranger.close()
        thread.join(5)
    assert received and all(len(data) == 16 for data in received)  # a nonce, nothing else


def test_a_port_file_whose_engine_died_is_not_dialled(monkeypatch: pytest.MonkeyPatch) -> None:
    # Windows takes about two seconds to refuse a closed loopback port: the engine's recorded pid
    # is checked first, and a dead one means "unreachable" (a new engine is started) at once.
    from memself.engine.client import EngineClient, EngineRequestError

    monkeypatch.setenv(FOREIGN_ENV, "1")
    paths = make_store().paths
    listener = _loopback_listener()
    listener.setblocking(False)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    _port_file(paths, listener.getsockname()[1], pid=dead.pid)
    try:
        with pytest.raises(EngineRequestError) as failure:
            EngineClient(paths).ping(2.0)
        assert failure.value.code == "unreachable"
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody dialled the port
    finally:
        listener.close()


@pytest.mark.skipif(system.real_windows(), reason="Windows guards the file by its folder's ACL, not modes")
def test_a_port_file_others_can_read_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from memself.doctor import check_engine_port
    from memself.engine.client import EngineClient, EngineRequestError

    monkeypatch.setenv(FOREIGN_ENV, "1")
    paths = make_store().paths
    path = _port_file(paths, 9, mode=0o644)
    with pytest.raises(EngineRequestError) as failure:
        EngineClient(paths).ping(1.0)
    assert failure.value.code == "unsafe-dir" and str(path) in str(failure.value)
    check = check_engine_port(paths)
    assert check is not None and check.ok is False
    assert str(path) in check.summary and "644" in check.summary and str(path) in check.fix
    os.chmod(path, 0o600)
    assert check_engine_port(paths) is None  # nobody listens on port 9: the engine check's job


# -- the console ----------------------------------------------------------------------------------


def test_a_gbk_console_gets_a_question_mark_not_a_crash(isolated_home: Path) -> None:
    """GBK has no emoji: a memory holding one must still be listed (and added) there."""
    env = {**os.environ, "PYTHONIOENCODING": "gbk"}
    text = "回答一律用中文，不要用 emoji 😀"
    for args in (["rule", "add", text], ["list"]):
        done = subprocess.run(
            [sys.executable, "-m", "memself", *args], capture_output=True, env=env, timeout=60, cwd=REPO_ROOT
        )
        assert done.returncode == 0, done.stderr.decode("gbk", "replace")
        shown = done.stdout.decode("gbk")
        assert "回答一律用中文，不要用 emoji ?" in shown, shown
    stored = (isolated_home / ".memory-self-evolution" / "rule.jsonl").read_text(encoding="utf-8")
    assert text in stored  # the memory itself keeps its emoji


def test_fsync_file_flushes_through_a_descriptor_the_system_lets_flush(
    branch: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Windows' FlushFileBuffers refuses a read-only handle: there the file is opened for writing.
    path = tmp_path / "weights.bin"
    path.write_bytes(b"\x1a\r\n\x00" * 8)
    opened: list[int] = []
    real_open = os.open

    def recording_open(file: str | os.PathLike[str], flags: int, *args: int) -> int:
        opened.append(flags & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR))
        return real_open(file, flags, *args)

    monkeypatch.setattr(os, "open", recording_open)
    files.fsync_file(path)
    assert opened == [os.O_RDWR if branch == "windows" else os.O_RDONLY]
    assert path.read_bytes() == b"\x1a\r\n\x00" * 8


def _os_open_calls() -> list[tuple[str, int, str]]:
    """(file, line, flags source) of every ``os.open`` in the package."""
    found = []
    for source in sorted((REPO_ROOT / "memself").rglob("*.py")):
        tree = ast.parse(source.read_text(encoding="utf-8"))
        assignments = {
            target.id: node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "os.open" and len(node.args) >= 2:
                flags = node.args[1]
                # A name among the flags ("| flags") stands for what the module assigned it.
                named = [
                    ast.unparse(assignments[n.id])
                    for n in ast.walk(flags)
                    if isinstance(n, ast.Name) and n.id in assignments
                ]
                found.append((source.name, node.lineno, " | ".join([ast.unparse(flags), *named])))
    return found


def test_every_descriptor_that_writes_is_opened_binary() -> None:
    # Without O_BINARY, Windows' C runtime turns each written "\n" into "\r\n" (and reads stop at
    # a 0x1a byte): a stored line, a log line or a team file would not be the bytes we wrote.
    calls = _os_open_calls()
    writers = [c for c in calls if "O_WRONLY" in c[2] or "O_RDWR" in c[2]]
    assert len(writers) >= 8, calls
    assert [c for c in writers if "BINARY" not in c[2]] == []


def test_text_from_a_child_process_is_decoded_as_utf_8() -> None:
    # Without an encoding, text=True decodes with the locale's code page on Windows (cp936, cp1252):
    # a client's Chinese or emoji error message would raise instead of being shown.
    missing = []
    for source in sorted((REPO_ROOT / "memself").rglob("*.py")):
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and ast.unparse(node.func).startswith("subprocess.")):
                continue
            words = {k.arg: ast.unparse(k.value) for k in node.keywords}
            if (
                words.get("text") == "True" or words.get("universal_newlines") == "True"
            ) and "encoding" not in words:
                missing.append(f"{source.name}:{node.lineno}")
    assert missing == []
