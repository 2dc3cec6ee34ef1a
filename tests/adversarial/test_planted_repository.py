"""The repository the user opened is an attacker: code in it never runs inside a memself process.

Each memself process starts with the project as its working directory and the client's
environment. The planted repository holds ``memself/`` (with ``__main__.py``), the top-level
packages memself's processes import (``mcp``, ``anyio``, ``httpx``, ``numpy``, ...) and a
``sitecustomize.py``; each writes a marker file when imported. Every entry point runs with that
repository as its working directory and on ``PYTHONPATH``, for real, and must leave no marker.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from memself.engine.client import EngineClient, spawn_engine
from memself.hook.command import hook_command
from memself.hosts import HOSTS
from memself.install.entries import mcp_command
from memself.judge.start import judge_command, spawn_judge
from memself.maintenance import _spawn as spawn_maintenance
from memself.maintenance import ran_today
from memself.model.catalog import OFFLINE_MODEL
from memself.model.prepare_child import prepare_in_child
from memself.page.refresh import spawn_refresh
from memself.paths import DataPaths
from tests.support.hookproc import REPO_ROOT, TEST_SERVICE, hook_data, load_payloads  # noqa: F401

NOW = datetime(2026, 12, 3, 9, 0, tzinfo=timezone.utc)
PLANTED_PACKAGES = ("memself", "mcp", "anyio", "httpx", "numpy", "onnxruntime", "tokenizers", "pydantic")
PLANTED_MODULES = ("sitecustomize", "usercustomize")
MARKER_CODE = "import os\nopen(os.path.join({markers!r}, {name!r} + '.' + str(os.getpid())), 'w').close()\n"


class Planted:
    def __init__(self, root: Path) -> None:
        self.repo = root / "repo"
        self.markers = root / "markers"
        self.markers.mkdir(parents=True)
        for name in PLANTED_PACKAGES:
            package = self.repo / name
            package.mkdir(parents=True)
            (package / "__init__.py").write_text(MARKER_CODE.format(markers=str(self.markers), name=name))
        main = MARKER_CODE.format(markers=str(self.markers), name="memself.__main__")
        (self.repo / "memself" / "__main__.py").write_text(main)
        for name in PLANTED_MODULES:
            (self.repo / f"{name}.py").write_text(MARKER_CODE.format(markers=str(self.markers), name=name))

    def found(self) -> list[str]:
        return sorted(p.name for p in self.markers.iterdir())

    def env(self, **extra: str) -> dict[str, str]:
        return {**os.environ, "PYTHONPATH": str(self.repo), **extra}


@pytest.fixture
def planted(tmp_path: Path) -> Planted:
    return Planted(tmp_path / "planted")


@pytest.fixture
def in_planted(planted: Planted, monkeypatch: pytest.MonkeyPatch) -> Iterator[Planted]:
    """This process's children start in the planted repository with it on PYTHONPATH (as a
    hook process's would: it spawns with its own cwd and environment)."""
    monkeypatch.setenv("PYTHONPATH", str(planted.repo))
    monkeypatch.chdir(planted.repo)
    yield planted


def wait_pid(pid: int, timeout_s: float = 120.0) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    raise AssertionError(f"process {pid} still running after {timeout_s} s")


def test_the_plant_works_on_a_plain_module_start(planted: Planted) -> None:
    """The control: ``python -m memself`` in the planted repository runs the planted code."""
    subprocess.run(
        [sys.executable, "-m", "memself", "--version"],
        cwd=planted.repo,
        env=planted.env(),
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert {name.split(".")[0] for name in planted.found()} >= {"memself", "sitecustomize"}


async def _mcp_session(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[str, list[str]]:
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=str(cwd))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        tools = await session.list_tools()
        listed = await session.call_tool("memory_list", {})
    text = "".join(getattr(c, "text", "") for c in listed.content)
    return init.server_info.name, [t.name for t in tools.tools] + [text]


def _client_env(**extra: str) -> dict[str, str]:
    keep = ("HOME", "MEMSELF_HOME", "PATH", "LANG")
    return {**{k: os.environ[k] for k in keep if k in os.environ}, **extra}


@pytest.mark.parametrize("host", ["claude", "codebuddy"])
def test_registered_mcp_server_runs_none_of_the_repository(planted: Planted, host: str) -> None:
    argv = mcp_command(host)
    name, seen = anyio.run(_mcp_session, argv, planted.repo, _client_env(PYTHONPATH=str(planted.repo)))
    assert name == "memory-self-evolution"
    assert "memory_resolve" in seen and seen[-1] == "记忆库为空"
    assert planted.found() == []


def test_a_project_with_its_own_mcp_package_keeps_the_server_working(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "mcp").mkdir(parents=True)
    (project / "mcp" / "__init__.py").write_text('"""This project\'s own mcp package."""\nOWN = True\n')
    (project / "mcp" / "server.py").write_text("OWN = True\n")
    name, seen = anyio.run(_mcp_session, mcp_command("claude"), project, _client_env())
    assert name == "memory-self-evolution" and seen[-1] == "记忆库为空"


def test_registered_hook_commands_run_none_of_the_repository(
    planted: Planted,
    hook_data: DataPaths,  # noqa: F811
) -> None:
    payloads = load_payloads("claude-code-2.1.332.json")
    env = planted.env()
    for kind, event in HOSTS["claude"].EVENT_NAMES.items():
        payload = dict(payloads[event], cwd=str(planted.repo))
        done = subprocess.run(
            hook_command("claude", kind),
            input=json.dumps(payload).encode(),
            capture_output=True,
            cwd=planted.repo,
            env=env,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert b"memself hook:" not in done.stderr, done.stderr
    assert planted.found() == []


def test_judge_spawn_runs_none_of_the_repository(in_planted: Planted, tmp_path: Path) -> None:
    DataPaths.default().ensure()
    job = tmp_path / "no-such-job.json"
    wait_pid(spawn_judge(job))
    assert in_planted.found() == []
    # The same command with its output kept: memself's own refusal of a missing job.
    done = subprocess.run(judge_command(job), capture_output=True, text=True, timeout=60, check=False)
    assert "不是旁路任务文件" in done.stderr, done.stderr
    assert in_planted.found() == []


def test_maintenance_spawn_runs_none_of_the_repository(in_planted: Planted) -> None:
    paths = DataPaths.default()
    paths.ensure()
    code = wait_pid(spawn_maintenance(paths, 30, NOW))
    assert in_planted.found() == []
    assert code == 0 and ran_today(paths, NOW)


def test_engine_spawn_runs_none_of_the_repository(
    in_planted: Planted, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from memself.engine.client import stop_engine

    monkeypatch.setenv("MEMSELF_RUNTIME_DIR", str(tmp_path / "rt"))
    monkeypatch.setenv("MEMSELF_ENGINE_SERVICE", TEST_SERVICE)
    paths = DataPaths.default()
    paths.ensure()
    pid = spawn_engine(paths)
    assert pid is not None
    try:
        deadline = time.monotonic() + 60
        info: dict = {}
        while time.monotonic() < deadline:
            try:
                info = EngineClient(paths).ping(0.5)
                if info.get("ready"):
                    break
            except Exception:
                pass
            time.sleep(0.1)
        assert info.get("ready"), info
    finally:
        stop_engine(paths, timeout_s=10)  # returns once the engine has exited
    assert in_planted.found() == []


def test_page_refresh_runs_none_of_the_repository(in_planted: Planted) -> None:
    paths = DataPaths.default()
    paths.ensure()
    process = spawn_refresh(paths)
    assert process.wait(timeout=120) == 0
    assert in_planted.found() == []
    assert paths.html.exists()


def test_model_prepare_child_runs_none_of_the_repository(
    in_planted: Planted, shared_model_cache: Path
) -> None:
    prepare_in_child(OFFLINE_MODEL, shared_model_cache)  # prepared already: the child checks, exits 0
    assert in_planted.found() == []


PIP_SCRIPT = """#!{python}
import sys
from memself.cli import main
if __name__ == '__main__':
    sys.argv[0] = sys.argv[0].removesuffix('.exe')
    sys.exit(main())
"""


def test_console_script_runs_none_of_the_repository(planted: Planted, tmp_path: Path) -> None:
    """The script as pip writes it runs the plant; as install.sh leaves it, nothing of it."""
    from memself.install.console_script import isolate_console_script

    script = tmp_path / "bin" / "memself"
    script.parent.mkdir()
    script.write_text(PIP_SCRIPT.format(python=sys.executable))
    script.chmod(0o755)

    def run() -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [str(script), "--version"], cwd=planted.repo, env=planted.env(), capture_output=True, timeout=60
        )

    run()
    assert planted.found(), "pip's script honours PYTHONPATH"
    for marker in planted.markers.iterdir():
        marker.unlink()
    assert isolate_console_script(script)
    first = script.read_bytes()
    assert not isolate_console_script(script) and script.read_bytes() == first
    assert first.startswith(f"#!{sys.executable} -I\n".encode())
    done = run()
    assert done.returncode == 0 and b"memself" in done.stdout, done.stderr
    assert planted.found() == []


def test_console_script_with_the_sh_preamble_gets_isolated_too() -> None:
    from memself.install.console_script import isolated_text

    long_form = (
        b"#!/bin/sh\n'''exec' \"/opt/my tools/venv/bin/python3\" \"$0\" \"$@\"\n' '''\n"
        b"import sys\nfrom memself.cli import main\n"
    )
    changed = isolated_text(long_form)
    assert changed is not None
    assert b'\'\'\'exec\' "/opt/my tools/venv/bin/python3" -I "$0" "$@"\n' in changed
    assert isolated_text(changed) is None
    assert isolated_text(b"#!/bin/sh\necho not python\n") is None


def test_views_filler_spawn_runs_none_of_the_repository(
    in_planted: Planted, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memself.views.background import DELAY_ENV, SWITCH_ENV, start_background_fill

    monkeypatch.setenv(SWITCH_ENV, "1")
    monkeypatch.setenv(DELAY_ENV, "0")
    paths = DataPaths.default()
    paths.ensure()
    config = {"sideApiBase": "http://127.0.0.1:9/v1", "sideApiModel": "m", "enabled": True}
    paths.config.write_text(json.dumps(config), encoding="utf-8")
    pid = start_background_fill(paths)
    assert pid is not None
    wait_pid(pid)
    assert in_planted.found() == []
    logged = paths.log_file.read_text(encoding="utf-8")
    assert "views-fill-done" in logged or "views-fill-failed" in logged, logged  # the child ran memself
