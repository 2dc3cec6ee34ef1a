"""The warm engine: real engine processes (with a small test service) and in-process servers.

Spawned engines load ``tests.support.engine_test_service:make`` (the repo root on PYTHONPATH),
listen in a short runtime dir under /tmp (sun_path is ~104 bytes; pytest's tmp paths are longer),
and are stopped or killed by pid at teardown.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memself.engine import client as engine_client
from memself.engine import transport
from memself.engine.base import SERVICE_ENV
from memself.engine.client import (
    EngineClient,
    EngineRequestError,
    call_engine,
    engine_status,
    ensure_started,
    recall_or_none,
    stop_engine,
)
from memself.engine.location import RUNTIME_ENV, ensure_private_dir, locate, recorded_socket
from memself.engine.protocol import MAX_REQUEST_BYTES, PROTOCOL_VERSION, read_message, recv_exact
from memself.engine.server import EngineServer
from memself.errors import EngineUnavailable
from memself.paths import DataPaths
from memself.platform.sockets import peer_allowed, peer_uid
from tests.support import foreign
from tests.support.engine_test_service import WARM_UP_ENV, WARM_UP_FAIL_ENV, EngineTestService, HeldService
from tests.support.engines import start_engine_process
from tests.support.wheel_layout import install_copy

UNIX_ONLY = foreign.unix_sockets_only()

# A failed assertion or request inside a helper thread must fail its test.
pytestmark = pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")

TESTS_DIR = Path(__file__).resolve().parent
REPO_ROOT = TESTS_DIR.parent


def wait_for(predicate: Callable[[], object], timeout: float = 10.0, step: float = 0.02) -> object:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(step)


def alive(pid: int) -> bool:
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)  # reap our own children so they stop being "alive"
        if done:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def ready_recall(paths: DataPaths) -> dict | None:
    return recall_or_none(paths, "回答用什么语言", 1.0)


@pytest.fixture
def runtime_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="mse-", dir="/tmp"))
    monkeypatch.setenv(RUNTIME_ENV, str(base / "rt"))
    yield base / "rt"
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def paths(runtime_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[DataPaths]:
    """A data dir whose spawned engines host the test service; all of them die at teardown."""
    monkeypatch.setenv(SERVICE_ENV, "tests.support.engine_test_service:make")
    old = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT) + (os.pathsep + old if old else ""))
    monkeypatch.delenv(WARM_UP_ENV, raising=False)
    data = DataPaths.default()
    data.ensure()
    seen: set[int] = set()
    yield data
    with contextlib.suppress(EngineUnavailable):
        info = EngineClient(data).ping(0.3)
        seen.add(int(info["pid"]))
    seen.update(engine_client._SPAWNED_PIDS)
    seen.update(p.pid for p in engine_client._SPAWNED)
    with contextlib.suppress(EngineUnavailable):
        stop_engine(data, timeout_s=3.0)
    for pid in seen:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
    engine_client._SPAWNED_PIDS.clear()
    engine_client._SPAWNED.clear()


@contextlib.contextmanager
def in_process(
    paths: DataPaths, service: EngineTestService | None = None, wait_warm: bool = True, **options: object
) -> Iterator[EngineServer]:
    """A server on a thread; by default the test starts once the warm-up has finished (on a busy
    machine it may still be loading when the first request arrives, and only the tests about
    loading want that)."""
    options.setdefault("idle_s", 60.0)
    server = EngineServer(paths, **options)  # type: ignore[arg-type]
    assert server.start(service or EngineTestService(paths))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    if wait_warm:
        client = EngineClient(paths)
        wait_for(lambda: client.ping()["state"] != "loading", 10)
    try:
        yield server
    finally:
        server.shutdown("test")
        thread.join(5)
        assert not thread.is_alive()


def log_text(paths: DataPaths) -> str:
    return paths.log_file.read_text(encoding="utf-8") if paths.log_file.exists() else ""


# -- real engine processes ---------------------------------------------------------------------


@UNIX_ONLY
def test_spawned_engine_serves_then_stops(paths: DataPaths, runtime_dir: Path) -> None:
    assert engine_status(paths) is None
    assert ensure_started(paths) == "spawned"
    result = call_engine(paths, "echo", {"a": 1}, timeout_s=15)
    assert result["echo"] == {"a": 1}
    engine_pid = result["pid"]
    assert ensure_started(paths) == "running"

    client = EngineClient(paths)
    ping = client.ping()
    assert ping["pid"] == engine_pid and ping["ready"] is True
    assert client.matches(ping)
    status = client.status()
    assert status["transport"] == "unix" and status["state"] == "ready"
    assert status["service"] == {"name": "engine-test-service", "reloads": 0}

    location = locate(paths.root)
    assert Path(location.socket_path).parent == runtime_dir
    assert stat.S_IMODE(runtime_dir.stat().st_mode) == 0o700
    assert stat.S_ISSOCK(os.stat(location.socket_path).st_mode)
    assert stat.S_IMODE(os.stat(location.socket_path).st_mode) == 0o600

    with open(location.record_path, encoding="utf-8") as handle:
        assert handle.read() == location.socket_path + "\n"  # for clients that look elsewhere
    assert stat.S_IMODE(os.stat(location.record_path).st_mode) == 0o600

    assert stop_engine(paths) == engine_pid
    wait_for(lambda: not alive(engine_pid), 5)
    assert not os.path.exists(location.socket_path)
    assert not os.path.exists(location.record_path)
    assert stop_engine(paths) is None
    assert '"reason": "stop"' in log_text(paths)


def test_five_engines_started_at_once_leave_one(paths: DataPaths) -> None:
    processes = [start_engine_process(paths) for _ in range(5)]
    try:
        info = wait_for(lambda: engine_status(paths), 15)
        survivor = info["pid"]  # type: ignore[index]
        codes = {}
        for process in processes:
            if process.pid != survivor:
                codes[process.pid] = process.wait(timeout=15)
        assert len(codes) == 4 and set(codes.values()) == {0}
        assert survivor in {p.pid for p in processes} and alive(survivor)
        assert EngineClient(paths).ping()["pid"] == survivor
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
            process.wait()


def test_concurrent_clients_spawn_one_engine(paths: DataPaths) -> None:
    barrier = threading.Barrier(5)
    outcomes: list[str] = []

    def start() -> None:
        barrier.wait()
        outcomes.append(ensure_started(paths))

    threads = [threading.Thread(target=start) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Exactly one spawn; the others saw the lock it handed to its child (or, if a thread was
    # descheduled long enough, the engine already answering).
    assert outcomes.count("spawned") == 1 and len(outcomes) == 5, outcomes
    assert set(outcomes) <= {"spawned", "starting", "running"}, outcomes
    spawned = engine_client._SPAWNED_PIDS + [process.pid for process in engine_client._SPAWNED]
    assert len(spawned) == 1
    assert call_engine(paths, "echo", {}, 15)["pid"] == spawned[0]


def test_engine_exits_when_idle(paths: DataPaths) -> None:
    assert ensure_started(paths, idle_minutes=0.02) == "spawned"  # 1.2 s
    pid = call_engine(paths, "echo", {}, 15)["pid"]
    socket_path = locate(paths.root).socket_path
    started = time.monotonic()
    wait_for(lambda: not alive(pid), 10)
    assert time.monotonic() - started >= 0.8
    assert not os.path.exists(socket_path)
    assert '"reason": "idle"' in log_text(paths)


def test_stale_socket_file_is_replaced(paths: DataPaths) -> None:
    location = locate(paths.root)
    ensure_private_dir(location.runtime_dir)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(location.socket_path)  # bound, never listening, closed: what a crash leaves
    stale.close()
    assert os.path.exists(location.socket_path)

    with pytest.raises(EngineRequestError) as failure:
        EngineClient(paths).ping()
    assert failure.value.code == "unreachable"
    # A budget far longer than the new engine needs to start: None proves the turn did not wait.
    assert recall_or_none(paths, "你好", 30.0) is None
    result = wait_for(lambda: ready_recall(paths), 15)
    assert result["rules"][0]["text"] == "回答用中文"  # type: ignore[index]


def test_killed_engine_is_replaced_next_turn(paths: DataPaths) -> None:
    assert ensure_started(paths) == "spawned"
    first = wait_for(lambda: ready_recall(paths), 15)["pid"]  # type: ignore[index]
    os.kill(first, signal.SIGKILL)
    wait_for(lambda: not alive(first), 5)
    location = locate(paths.root)
    # Left behind by the crash: the socket file, or the TCP fallback's port file.
    assert os.path.exists(location.socket_path if foreign.unix_sockets() else location.port_file)

    # This turn: no recall, though its budget would let the new engine start and answer.
    assert recall_or_none(paths, "你好", 30.0) is None
    second = wait_for(lambda: ready_recall(paths), 15)["pid"]  # type: ignore[index]
    assert second != first


_CLIENT_SCRIPT = """
import json, sys, time
import memself
from memself.engine.client import recall_or_none
from memself.paths import DataPaths
results = []
deadline = time.monotonic() + 20
while time.monotonic() < deadline:
    result = recall_or_none(DataPaths.default(), "hello", 1.0)
    results.append(None if result is None else result["pid"])
    if result is not None:
        break
    time.sleep(0.05)
print(json.dumps({"file": memself.__file__, "results": results}))
"""


def test_installed_code_change_restarts_engine(paths: DataPaths, tmp_path: Path) -> None:
    # A private copy of the package plays "the installed memself"; editing its __init__.py is
    # what an upgrade does. Clients run as separate processes importing that copy.
    site = tmp_path / "site"
    install_copy(site)
    # The engines it spawns host the tests' service, imported from beside the package they run.
    (site / "tests").symlink_to(REPO_ROOT / "tests", target_is_directory=True)
    env = dict(os.environ, PYTHONPATH=f"{site}{os.pathsep}{REPO_ROOT}")

    def run_client() -> dict:
        done = subprocess.run(
            [sys.executable, "-c", _CLIENT_SCRIPT],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return json.loads(done.stdout)

    first = run_client()
    assert first["file"] == str(site / "memself" / "__init__.py")
    old_pid = first["results"][-1]
    assert first["results"][0] is None and isinstance(old_pid, int)  # cold: spawned, then served

    with open(site / "memself" / "__init__.py", "a", encoding="utf-8") as handle:
        handle.write("# upgraded\n")
    second = run_client()
    assert second["results"][0] is None  # the old engine said "version-mismatch" and left
    new_pid = second["results"][-1]
    assert isinstance(new_pid, int) and new_pid != old_pid
    wait_for(lambda: not alive(old_pid), 5)
    assert "engine-version-mismatch" in log_text(paths)


_HOOK_SCRIPT = """
import sys, time
sys.path.insert(0, sys.argv[1])
from memself.engine.client import recall_or_none
from memself.paths import DataPaths
assert "site" not in sys.modules  # really -I -S: no site-packages, no editable finder
started = time.monotonic()
result = recall_or_none(DataPaths.default(), "hello", 1.0)
print(result is None, round(time.monotonic() - started, 3))
"""


def test_hook_process_spawns_engine_and_keeps_no_host_pipe(paths: DataPaths) -> None:
    # The hook runs as ``python -I -S``; the engine it spawns must still import memself, and it
    # must not inherit the host's pipes (the host would wait for EOF as long as the engine lives).
    extra_r, extra_w = os.pipe()
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-S", "-c", _HOOK_SCRIPT, str(REPO_ROOT)],
            capture_output=True,
            text=True,
            timeout=20,
            pass_fds=(extra_w,),
            check=True,
        )
        os.close(extra_w)
        extra_w = -1
        cold, seconds = done.stdout.split()
        assert cold == "True" and float(seconds) < 0.5  # no engine yet: answered without recall
        result = wait_for(lambda: ready_recall(paths), 15)
        assert result["rules"][0]["id"] == "r1"  # type: ignore[index]
        os.set_blocking(extra_r, False)
        assert os.read(extra_r, 1) == b""  # EOF: nobody else holds the write end
    finally:
        os.close(extra_r)
        if extra_w >= 0:
            os.close(extra_w)


def test_cli_engine_commands(paths: DataPaths, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from memself.cli import main

    monkeypatch.setenv(WARM_UP_ENV, "0.3")
    runner = CliRunner()
    result = runner.invoke(main, ["engine", "status"])
    assert result.exit_code == 0 and "召回引擎未运行" in result.output
    result = runner.invoke(main, ["engine", "start", "--timeout", "20"])
    assert result.exit_code == 0, result.output
    assert "召回引擎已就绪" in result.output
    pid = EngineClient(paths).ping()["pid"]
    result = runner.invoke(main, ["engine", "status"])
    assert result.exit_code == 0
    assert "召回引擎运行中" in result.output and f"进程      {pid}" in result.output
    assert "与当前安装一致" in result.output and "就绪" in result.output
    data = json.loads(runner.invoke(main, ["engine", "status", "--json"]).output)
    assert data["running"] is True and data["pid"] == pid
    result = runner.invoke(main, ["engine", "stop"])
    assert result.exit_code == 0 and f"召回引擎已停止（进程 {pid}）" in result.output
    assert "召回引擎未运行" in runner.invoke(main, ["engine", "stop"]).output


# -- in-process server: protocol, limits, states -----------------------------------------------


def test_single_instance_in_process(paths: DataPaths) -> None:
    with in_process(paths) as first:
        second = EngineServer(paths, idle_s=60, lock_wait_s=120)
        started = time.monotonic()
        assert second.acquire() is False  # the first one answers ping: leave at once
        assert time.monotonic() - started < 60  # not after waiting out the lock
        assert EngineClient(paths).ping()["pid"] == first.pid


@UNIX_ONLY
def test_peer_uid_check() -> None:
    assert peer_allowed(1000, 1000)
    assert not peer_allowed(1001, 1000)
    assert not peer_allowed(0, 1000)
    assert peer_allowed(None, 1000)  # platform cannot tell: the 0700 directory guards
    left, right = socket.socketpair(socket.AF_UNIX)
    try:
        assert peer_uid(left) == os.getuid()
    finally:
        left.close()
        right.close()


@UNIX_ONLY
def test_other_users_are_refused(paths: DataPaths) -> None:
    with in_process(paths, allowed_uid=os.getuid() + 1, wait_warm=False):
        with pytest.raises(EngineRequestError) as failure:
            EngineClient(paths).ping()
        assert failure.value.code == "refused"
        assert recall_or_none(paths, "你好", 0.5) is None
    assert "engine-refused" in log_text(paths)


@UNIX_ONLY
def test_oversized_messages_are_rejected(paths: DataPaths) -> None:
    client = EngineClient(paths)
    with in_process(paths):
        with pytest.raises(EngineRequestError) as failure:
            client.request("echo", {"text": "x" * (MAX_REQUEST_BYTES + 1)})
        assert failure.value.code == "too-large"

        raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        raw.settimeout(2)
        raw.connect(locate(paths.root).socket_path)
        raw.sendall((2 * MAX_REQUEST_BYTES).to_bytes(4, "big"))  # announce 2 MiB, send nothing
        reply = read_message(raw, 1 << 16)
        raw.close()
        assert reply["ok"] is False and reply["error"] == "too-large"

        with pytest.raises(EngineRequestError) as failure:
            client.request("big", {"n": 5 << 20}, 5.0)
        assert failure.value.code == "too-large"

        # A 10 MB prompt is cut on the client, not refused: the hook still gets its recall.
        result = recall_or_none(paths, "长" * 10_000_000, 2.0)
        assert result is not None and result["text_len"] == engine_client.RECALL_TEXT_MAX_CHARS
        assert client.ping()["ready"] is True  # still serving


@UNIX_ONLY
def test_garbage_request_gets_bad_request(paths: DataPaths) -> None:
    with in_process(paths):
        for body in (b"not json", b"[1, 2]", json.dumps({"op": 3}).encode()):
            raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            raw.settimeout(2)
            raw.connect(locate(paths.root).socket_path)
            raw.sendall(len(body).to_bytes(4, "big") + body)
            reply = read_message(raw, 1 << 16)
            raw.close()
            assert reply == {"ok": False, "error": "bad-request", "message": "召回引擎收到了格式不对的请求"}
        assert EngineClient(paths).ping()["ready"] is True


def test_slow_request_does_not_block_ping(paths: DataPaths) -> None:
    """Ping and status are answered while a request sits in the service: the test lets that
    request go only after they answered."""
    client = EngineClient(paths)
    service = HeldService(paths)
    with in_process(paths, service):
        slow_result: list[dict] = []
        slow = threading.Thread(target=lambda: slow_result.append(client.request("hold", {}, 60.0)))
        slow.start()
        try:
            assert service.holding.wait(30)
            assert client.ping(30.0)["ready"] is True
            assert client.status(30.0)["state"] == "ready"
            assert slow_result == []  # still held
        finally:
            service.release.set()
        slow.join(30)
        assert slow_result == [{"held": True}]


def test_loading_engine_answers_ping_and_not_ready(paths: DataPaths) -> None:
    gate = threading.Event()
    client = EngineClient(paths)
    with in_process(paths, EngineTestService(paths, warm_gate=gate), wait_warm=False):
        ping = client.ping()
        assert ping["ready"] is False and ping["state"] == "loading"
        with pytest.raises(EngineRequestError) as failure:
            client.request("echo", {})
        assert failure.value.code == "not-ready"
        started = time.monotonic()
        assert recall_or_none(paths, "你好", 0.3) is None  # waits its budget, then gives up
        # Gives up long before the held warm-up (ten seconds) could end.
        assert 0.2 <= time.monotonic() - started < 5.0
        threading.Timer(0.2, gate.set).start()
        result = client.request("echo", {"x": 1}, 3.0, wait_ready_s=3.0)  # waits for warm-up
        assert result["echo"] == {"x": 1}
        assert client.ping()["ready"] is True


def test_changed_data_files_reload_the_service(paths: DataPaths) -> None:
    client = EngineClient(paths)
    with in_process(paths):
        assert client.request("echo", {})["reloads"] == 0
        paths.group_file("rule").write_text('{"id": "x"}\n', encoding="utf-8")
        assert client.request("echo", {})["reloads"] == 1
        assert client.request("echo", {})["reloads"] == 1  # unchanged: no reload
        paths.config.write_text('{"recallTopK": 5}', encoding="utf-8")
        assert client.request("echo", {})["reloads"] == 2
        assert client.status()["reloads"] == 2


def test_failed_warm_up_reports_and_retries(
    paths: DataPaths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "broken"
    marker.write_text("x")
    monkeypatch.setenv(WARM_UP_FAIL_ENV, str(marker))
    client = EngineClient(paths)
    service = EngineTestService(paths)
    with in_process(paths, service):
        wait_for(lambda: client.ping()["state"] == "failed", 5)
        with pytest.raises(EngineRequestError) as failure:
            client.request("echo", {})
        assert failure.value.code == "warm-up-failed"
        assert "模型文件缺失" in str(failure.value)
        assert "模型文件缺失" in client.status()["error"]
        marker.unlink()
        paths.config.write_text('{"model": "fixed"}', encoding="utf-8")  # the user fixes it
        result = client.request("echo", {}, 5.0, wait_ready_s=4.0)
        assert result["echo"] == {} and service.warm_ups == 2


def test_service_errors_keep_the_engine_serving(paths: DataPaths) -> None:
    client = EngineClient(paths)
    with in_process(paths):
        with pytest.raises(EngineRequestError) as failure:
            client.request("fail", {})
        assert failure.value.code == "service-error" and str(failure.value) == "测试用的错误"
        with pytest.raises(EngineRequestError) as failure:
            client.request("boom", {})
        assert failure.value.code == "internal-error"
        assert "secret-looking" not in str(failure.value)
        assert client.request("echo", {"ok": 1})["echo"] == {"ok": 1}
    log = log_text(paths)
    assert "engine-service-error" in log and "RuntimeError at engine_test_service.py:" in log
    assert "secret-looking" not in log  # messages may quote prompts: never logged


@UNIX_ONLY
def test_removed_socket_file_makes_the_engine_exit(paths: DataPaths) -> None:
    with in_process(paths) as server:
        os.unlink(locate(paths.root).socket_path)
        wait_for(lambda: server.stop_reason == "socket-removed", 3)
    assert recall_or_none(paths, "你好", 0.5) is None  # lock free again: a successor spawns
    assert len(engine_client._SPAWNED_PIDS) == 1


def test_version_mismatch_stops_the_engine(paths: DataPaths) -> None:
    with in_process(paths) as server:
        other = EngineClient(paths, fingerprint="0.0.1:old")
        assert other.ping()["pid"] == server.pid  # ping and status never stop it
        with pytest.raises(EngineRequestError) as failure:
            other.request("echo", {})
        assert failure.value.code == "version-mismatch"
        wait_for(lambda: server.stop_reason == "version-mismatch", 2)
        wait_for(lambda: not os.path.exists(locate(paths.root).socket_path), 5)


def test_an_older_wire_format_stops_the_engine(paths: DataPaths, monkeypatch: pytest.MonkeyPatch) -> None:
    """Same install, older protocol (a running engine from before an editable checkout moved on,
    or the reverse): the service op is refused as a mismatch, and the engine makes way."""
    with in_process(paths) as server:
        monkeypatch.setattr(engine_client, "PROTOCOL_VERSION", PROTOCOL_VERSION - 1)
        with pytest.raises(EngineRequestError) as failure:
            EngineClient(paths).request("echo", {})
        assert failure.value.code == "version-mismatch"
        wait_for(lambda: server.stop_reason == "version-mismatch", 2)


@UNIX_ONLY
def test_runtime_dir_must_be_private(paths: DataPaths, runtime_dir: Path, tmp_path: Path) -> None:
    runtime_dir.mkdir(mode=0o755)
    os.chmod(runtime_dir, 0o755)
    with pytest.raises(EngineRequestError) as failure:  # the client never trusts a loose dir
        EngineClient(paths).ping()
    assert failure.value.code == "unsafe-dir"
    ensure_private_dir(str(runtime_dir))  # the engine tightens its own directory
    assert stat.S_IMODE(runtime_dir.stat().st_mode) == 0o700

    runtime_dir.rmdir()
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    runtime_dir.symlink_to(target)  # a planted symlink is refused by both sides
    with pytest.raises(OSError):
        ensure_private_dir(str(runtime_dir))
    with pytest.raises(EngineRequestError) as failure:
        EngineClient(paths).ping()
    assert failure.value.code == "unsafe-dir"
    # No reason to go without recall: the engine listens in a private directory of its own,
    # which clients find through the data directory; the planted one stays untouched.
    assert recall_or_none(paths, "你好", 0.5) is None  # this turn; an engine starts
    assert wait_for(lambda: ready_recall(paths), 15)
    status = EngineClient(paths).status()
    assert status["runtime_fallback"]["unsafe"] == str(runtime_dir)
    assert Path(status["address"]).parent not in (runtime_dir, target)
    assert list(target.iterdir()) == []


def test_tcp_fallback_with_token(paths: DataPaths) -> None:
    client = EngineClient(paths)
    port_file = Path(locate(paths.root).port_file)
    with in_process(paths, transport="tcp") as server:
        assert stat.S_IMODE(port_file.stat().st_mode) == 0o600
        port, token, pid = transport.parse_port_file(port_file.read_text())
        info = {"port": port, "token": token, "pid": pid}
        assert info["pid"] == server.pid and len(info["token"]) >= 32
        assert not os.path.exists(locate(paths.root).socket_path)
        assert client.request("echo", {"via": "tcp"})["echo"] == {"via": "tcp"}
        assert client.status()["transport"] == "tcp"

        raw = socket.create_connection(("127.0.0.1", info["port"]), timeout=2)
        # The engine proves it holds the token before anything is sent to it.
        nonce = os.urandom(transport.NONCE_BYTES)
        raw.sendall(nonce)
        assert recv_exact(raw, transport.PROOF_BYTES) == transport.tcp_proof(info["token"], nonce)
        body = json.dumps({"op": "ping", "payload": {}, "token": "wrong"}).encode()
        raw.sendall(len(body).to_bytes(4, "big") + body)
        reply = read_message(raw, 1 << 16)
        raw.close()
        assert reply["ok"] is False and reply["error"] == "refused"
    assert not port_file.exists()


def test_client_is_light_on_the_hook_path() -> None:
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); before = set(sys.modules)\n"
        "import memself.engine.client\n"
        "print(' '.join(sorted(set(sys.modules) - before)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code, str(REPO_ROOT)],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    loaded = set(done.stdout.split())
    assert "memself.engine.client" in loaded
    heavy = {
        "subprocess",
        "socket",
        "selectors",
        "hashlib",
        "pathlib",
        "threading",
        "typing",
        "fcntl",
        "numpy",
        "torch",
        "sentence_transformers",
        "httpx",
        "mcp",
        "click",
        "jieba",
    }
    assert loaded.isdisjoint(heavy), loaded & heavy


@UNIX_ONLY
def test_location_is_short_stable_and_per_data_dir(
    tmp_path: Path, runtime_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(RUNTIME_ENV, raising=False)
    data = tmp_path / "data"
    data.mkdir()
    alias = tmp_path / "alias"
    alias.symlink_to(data)
    # Short, as a real XDG_RUNTIME_DIR is (a worker's tmp_path can be too long for a socket path).
    xdg = runtime_dir.parent / "xdg"
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(xdg))
    here = locate(data)
    assert here.socket_path == str(xdg / "memself" / f"{here.key}.sock")
    assert locate(alias).key == here.key  # the resolved directory decides
    assert locate(tmp_path / "other").key != here.key
    assert here.port_file == str(data / "engine-port")
    # One engine per data directory, whatever the runtime directory: the lock is in the data dir.
    assert here.lock_path == str(data / "engine.lock") == locate(alias).lock_path

    long_xdg = tmp_path / ("x" * 120)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(long_xdg))
    fallback = locate(data)  # sun_path would overflow: the short /tmp directory instead
    assert fallback.runtime_dir == f"/tmp/memself-{os.getuid()}"
    assert len(fallback.socket_path.encode()) <= 100


def test_socket_record_is_trusted_only_when_private(paths: DataPaths) -> None:
    location = locate(paths.root)
    record = Path(location.record_path)
    elsewhere = Path(tempfile.mkdtemp(prefix="msr-", dir="/tmp"))  # 0700, ours
    try:
        sock = str(elsewhere / "e.sock")
        record.write_text(sock + "\n", encoding="utf-8")
        os.chmod(record, 0o600)
        assert recorded_socket(location) == sock
        os.chmod(record, 0o620)  # someone else could have written it
        assert recorded_socket(location) is None
        os.chmod(record, 0o600)
        os.chmod(elsewhere, 0o755)  # a directory others can plant a socket in
        assert recorded_socket(location) is None
        os.chmod(elsewhere, 0o700)
        for text in ("e.sock", location.socket_path, str(elsewhere / "e.txt")):
            record.write_text(text + "\n", encoding="utf-8")
            assert recorded_socket(location) is None, text
        record.unlink()
        real = elsewhere / "record"
        real.write_text(sock + "\n", encoding="utf-8")
        os.chmod(real, 0o600)
        record.symlink_to(real)
        assert recorded_socket(location) is None
    finally:
        shutil.rmtree(elsewhere, ignore_errors=True)


def test_hook_with_closed_stdin_still_hands_over_the_lock(paths: DataPaths) -> None:
    script = (
        "import os, sys; os.close(0); sys.path.insert(0, sys.argv[1])\n"
        "from memself.engine.client import ensure_started\n"
        "from memself.paths import DataPaths\n"
        "print(ensure_started(DataPaths.default()))\n"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", script, str(REPO_ROOT)],
        capture_output=True,
        text=True,
        timeout=20,
        check=True,
    )
    assert done.stdout.strip() == "spawned"
    assert wait_for(lambda: ready_recall(paths), 15)
    from memself.engine import instance_lock

    assert instance_lock.is_held(locate(paths.root).lock_path)  # the engine really holds it


def test_stop_waits_for_a_starting_engine(paths: DataPaths, monkeypatch: pytest.MonkeyPatch) -> None:
    """An engine that holds its lock but does not listen yet (still importing) is not "not
    running": stop waits until it answers and stops it, so nothing is left behind."""
    monkeypatch.setenv(WARM_UP_ENV, "0")
    spawned = engine_client.spawn_engine(paths)
    assert spawned is not None
    pid = stop_engine(paths, timeout_s=20.0)
    assert pid == spawned
    wait_for(lambda: not alive(spawned), 5)


def test_an_engine_that_says_ready_serves_at_once(paths: DataPaths, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ping reporting ``ready`` is the promise that requests are served: a request in the moment
    between the warm-up finishing and its log line being written must not be refused as loading.
    The slow log line stands in for a busy disk, which a test cannot cause on demand."""
    import memself.engine.server as server_module

    real_log = server_module.log

    def slow_log(paths: DataPaths, event: str, **fields: object) -> None:
        if event == "engine-ready":
            time.sleep(1.0)
        real_log(paths, event, **fields)

    monkeypatch.setattr(server_module, "log", slow_log)
    client = EngineClient(paths)
    with in_process(paths, wait_warm=False):
        wait_for(lambda: client.ping()["state"] != "loading", 10)
        assert client.request("echo", {"x": 1})["echo"] == {"x": 1}
