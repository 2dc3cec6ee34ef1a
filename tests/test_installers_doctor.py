"""memself doctor: registrations, the judge endpoint (a real local HTTP server), fixes."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from memself import doctor
from memself.config import set_config_value
from memself.errors import MemselfError
from memself.install import INSTALLERS, claude_cli
from memself.install.base import InstallContext
from memself.install.entries import mcp_command
from memself.paths import DataPaths
from tests.support.cli import memself
from tests.support.hookproc import hook_data
from tests.support.judge_helpers import API_KEY, configure
from tests.support.judge_server import Reply, running_judge, sse

__all__ = ["hook_data"]

REPO = Path(__file__).resolve().parent.parent
CURSOR = INSTALLERS["cursor"]
SKILL = Path(__file__).parent / "fixtures" / "installers" / "_skill" / "memory-self-evolution-manage"


@pytest.fixture
def packaged_skill(monkeypatch: pytest.MonkeyPatch) -> None:
    # Doctor compares the installed copy with the packaged one; point both at the test skill.
    monkeypatch.setattr(doctor, "default_skill_source", lambda: SKILL)


def test_host_not_installed_is_not_a_problem(isolated_home: Path) -> None:
    check = doctor.check_host("cursor", InstallContext(home=isolated_home, skill_source=SKILL))
    assert check.ok is None and "未安装" in check.summary


def test_host_registration_is_checked_against_the_current_commands(
    isolated_home: Path, packaged_skill: None
) -> None:
    (isolated_home / ".cursor").mkdir()
    before = doctor.check_host("cursor", InstallContext(home=isolated_home, skill_source=SKILL))
    assert before.ok is False and before.fix == "memself setup --only cursor"
    CURSOR.apply(InstallContext(home=isolated_home, skill_source=SKILL))
    after = doctor.check_host("cursor", InstallContext(home=isolated_home, skill_source=SKILL))
    assert after.ok is True, after.summary
    assert str(isolated_home / ".cursor/hooks.json") in after.summary
    # A registration pointing at another interpreter (a moved venv) is stale.
    hooks = isolated_home / ".cursor/hooks.json"
    hooks.write_text(hooks.read_text().replace("-I -S", "-I  -S"))
    assert doctor.check_host("cursor", InstallContext(home=isolated_home, skill_source=SKILL)).ok is False


def test_claude_without_binary_names_the_manual_command(isolated_home: Path, packaged_skill: None) -> None:
    (isolated_home / ".claude").mkdir()
    check = doctor.check_host("claude", InstallContext(home=isolated_home, skill_source=SKILL))
    # The hooks are missing too, and setup adds those: a fault, with the MCP step to do by hand.
    assert check.ok is False
    assert "memself setup --only claude" in check.fix
    assert "claude mcp add --scope user memory-self-evolution --" in check.fix
    # Once setup has added them, only the step setup cannot take is left: a warning whose line
    # is the exact command setup would have run.
    INSTALLERS["claude"].apply(InstallContext(home=isolated_home, skill_source=SKILL))
    check = doctor.check_host("claude", InstallContext(home=isolated_home, skill_source=SKILL))
    argv = claude_cli.add_argv("claude", mcp_command("claude"))
    assert check.ok is None and doctor.is_warning(check)
    assert f"需要手动运行：{claude_cli.shell_line(argv)}；" in check.summary
    assert "已注册" in check.summary and "settings.json" not in check.fix
    assert "MEMORY_CLAUDE_BIN" in check.fix


def _without_claude() -> dict[str, str]:
    """This environment with no ``claude`` on PATH and no MEMORY_CLAUDE_BIN."""
    env = {k: v for k, v in os.environ.items() if k != claude_cli.BIN_ENV}
    folders = env.get("PATH", "").split(os.pathsep)
    env["PATH"] = os.pathsep.join(f for f in folders if f and not (Path(f) / "claude").exists())
    return env


def test_doctor_without_the_claude_command_warns_with_the_manual_step_and_exits_0(
    isolated_home: Path,
    hook_data: DataPaths,
    model_cache: Path,
) -> None:
    """The user's report: setup without ``claude`` on PATH registers the hooks and skill but not
    the MCP server; doctor must not call that a fault nor send them back to setup."""
    env = _without_claude()
    (isolated_home / ".claude").mkdir()
    set_config_value(hook_data, "model", "multilingual-e5-small")  # the offline one, prepared
    setup = memself("setup", "--only", "claude", env=env)
    assert setup.returncode == 0, setup.stdout + setup.stderr
    argv = claude_cli.add_argv("claude", mcp_command("claude"))
    assert claude_cli.shell_line(argv) in setup.stdout  # setup printed the step as well

    done = memself("doctor", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    [claude] = [line for line in lines if line[2:].startswith("Claude Code：")]
    assert claude.startswith(f"{_shown('⚠')} Claude Code："), done.stdout
    assert claude_cli.shell_line(argv) in claude, done.stdout
    advice = lines[lines.index(claude) + 1]
    assert advice.startswith("    建议：") and "MEMORY_CLAUDE_BIN" in advice, done.stdout
    assert "修复：" not in done.stdout and lines[-1].startswith("没有故障。"), done.stdout

    # A real fault beside it still fails doctor: the hooks taken out of settings.json.
    settings = isolated_home / ".claude" / "settings.json"
    data = json.loads(settings.read_text(encoding="utf-8"))
    del data["hooks"]
    settings.write_text(json.dumps(data), encoding="utf-8")
    broken = memself("doctor", env=env)
    assert broken.returncode == 1, broken.stdout + broken.stderr
    [claude] = [line for line in broken.stdout.splitlines() if line[2:].startswith("Claude Code：")]
    assert claude.startswith(f"{_shown('✗')} Claude Code：未注册或指向旧的路径"), broken.stdout
    assert "修复：memself setup --only claude，并手动运行：claude mcp add" in broken.stdout


def _shown(mark: str) -> str:
    """``mark`` as the CLI's console shows it: "?" where its encoding cannot spell it (GBK)."""
    try:
        mark.encode(os.environ.get("PYTHONIOENCODING") or "utf-8")
    except UnicodeEncodeError:
        return "?"
    return mark


def test_malformed_host_file_is_reported_with_its_name(isolated_home: Path, packaged_skill: None) -> None:
    (isolated_home / ".codebuddy").mkdir()
    (isolated_home / ".codebuddy/settings.json").write_text("{,")
    check = doctor.check_host("codebuddy", InstallContext(home=isolated_home, skill_source=SKILL))
    assert check.ok is False and "settings.json 不是合法的 JSON" in check.summary


def test_judge_unconfigured_and_legacy(isolated_home: Path) -> None:
    paths = DataPaths.default()
    check = doctor.check_judge(paths)
    # Unconfigured is a supported state (recall works), not a fault; the fix is still shown.
    assert check.ok is None and "sideApiBase" in check.summary and "apiKey" in check.summary
    assert "memself setup" in check.fix
    paths.ensure()
    paths.config.write_text('{"sideJudge": false}\n')
    legacy = doctor.check_judge(paths)
    assert legacy.ok is False and legacy.fix == "memself setup sidepath"


def test_judge_real_request_hides_the_key(isolated_home: Path) -> None:
    paths = DataPaths.default()
    with running_judge() as judge:
        configure(paths, judge.url)
        judge.script(sse("OK"))
        ok = doctor.check_judge(paths)
        assert ok.ok is True and "真实请求成功" in ok.summary
        assert judge.requests[0].headers.get("Authorization") == f"Bearer {API_KEY}"
        judge.script(Reply("status", f'{{"error": "bad key {API_KEY}"}}', 401))
        bad = doctor.check_judge(paths)
    assert bad.ok is False and "401" in bad.summary
    for check in (ok, bad):
        assert API_KEY not in check.summary + check.fix


def test_judge_check_sends_nothing_to_an_endpoint_the_key_was_not_entered_for(isolated_home: Path) -> None:
    paths = DataPaths.default()
    with running_judge() as user, running_judge() as other:
        configure(paths, user.url)
        set_config_value(paths, "sideApiBase", other.url)
        check = doctor.check_judge(paths)
        assert other.requests == [] and user.requests == []
    assert check.ok is False and "为防密钥外泄" in check.summary
    assert "memself key set" in check.fix and API_KEY not in check.summary + check.fix


def test_judge_check_binds_an_original_format_key_only_when_the_user_confirms(isolated_home: Path) -> None:
    paths = DataPaths.default()
    with running_judge() as judge:
        configure(paths, judge.url)
        paths.side_secret.write_text(json.dumps({"apiKey": API_KEY}), encoding="utf-8")
        judge.script(sse("OK"))
        asked: list[str] = []
        for confirm in (None, lambda address: asked.append(address) or False):
            check = doctor.check_judge(paths, confirm=confirm)
            assert check.ok is False and "没有发送请求" in check.summary and "memself doctor" in check.fix
            assert judge.requests == []
        assert asked == [judge.url]  # the address is shown to the user
        assert json.loads(paths.side_secret.read_text(encoding="utf-8")) == {"apiKey": API_KEY}
        check = doctor.check_judge(paths, confirm=lambda address: True)
        assert check.ok is True and len(judge.requests) == 1
    assert json.loads(paths.side_secret.read_text(encoding="utf-8"))["boundApiBase"] == judge.url


def test_judge_check_reports_an_unusable_key_file(isolated_home: Path) -> None:
    paths = DataPaths.default()
    configure(paths, "http://127.0.0.1:9/v1")
    paths.side_secret.write_bytes(b"")
    check = doctor.check_judge(paths)
    assert check.ok is False and "side-secret.json 是空文件" in check.summary
    assert check.fix == "memself key set 重新输入 apiKey"


def test_render_counts_problems_and_warnings() -> None:
    lines: list[str] = []
    doctor.render(
        [
            doctor.Check("a", True, "好"),
            doctor.Check("b", False, "坏", "修它"),
            doctor.Check("c", None, "没装"),
            doctor.Check("d", None, "要你动手", "这样做"),
        ],
        lines.append,
    )
    assert lines == [
        "✓ a：好",
        "✗ b：坏",
        "    修复：修它",
        "- c：没装",
        "⚠ d：要你动手",
        "    建议：这样做",
        "发现 1 个问题，按上面的「修复」处理。另有 1 条提醒（⚠），不影响使用，见上面的「建议」。",
    ]
    lines.clear()
    doctor.render(
        [doctor.Check("a", True, "好"), doctor.Check("d", None, "要你动手", "这样做")], lines.append
    )
    assert lines[-1] == "没有故障。另有 1 条提醒（⚠），不影响使用，见上面的「建议」。"
    lines.clear()
    doctor.render([doctor.Check("a", True, "好"), doctor.Check("c", None, "没装")], lines.append)
    assert lines[-1] == "一切正常。"


@pytest.fixture
def engine_paths(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[DataPaths]:
    """Spawned engines host the engine tests' small service (no model); all stop at teardown."""
    from memself.engine import client as engine_client
    from memself.engine.base import SERVICE_ENV
    from memself.engine.location import RUNTIME_ENV

    runtime = Path(tempfile.mkdtemp(prefix="msd-", dir="/tmp"))
    monkeypatch.setenv(RUNTIME_ENV, str(runtime / "rt"))
    monkeypatch.setenv(SERVICE_ENV, "tests.support.engine_test_service:make")
    old = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv("PYTHONPATH", str(REPO) + (os.pathsep + old if old else ""))
    paths = DataPaths.default()
    paths.ensure()
    yield paths
    with contextlib.suppress(MemselfError):
        engine_client.stop_engine(paths, timeout_s=3.0)
    for pid in list(engine_client._SPAWNED_PIDS):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
    shutil.rmtree(runtime, ignore_errors=True)


def test_engine_is_started_and_reported_ready(engine_paths: DataPaths) -> None:
    check = doctor.check_engine(engine_paths, wait_s=60)
    assert check.ok is True and "运行中" in check.summary, check.summary
    # The engine was not running: the doctor says it started it, and only then.
    assert "本次检查启动了它" in check.summary, check.summary
    again = doctor.check_engine(engine_paths, wait_s=60)
    assert again.ok is True and "本次检查启动" not in again.summary, again.summary


def test_engine_that_cannot_load_its_model_is_reported(
    engine_paths: DataPaths, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from tests.support.engine_test_service import WARM_UP_FAIL_ENV

    marker = tmp_path / "fail"
    marker.write_text("1")
    monkeypatch.setenv(WARM_UP_FAIL_ENV, str(marker))
    check = doctor.check_engine(engine_paths, wait_s=60)
    assert check.ok is False and "模型文件缺失（测试）" in check.summary, check.summary


def test_the_data_check_counts_memories_per_workspace(isolated_home: Path) -> None:
    from datetime import datetime, timezone

    from memself.store.memory_store import MemoryStore
    from memself.store.workspaces import Workspace

    paths = DataPaths.default()
    assert doctor.check_data(paths).summary == "还没有记忆文件（第一次写入时创建）"
    store = MemoryStore(paths)
    now = datetime(2026, 12, 1, tzinfo=timezone.utc)
    pay, shop = Workspace("/code/pay-service", "pay-service"), Workspace("/code/shop", "shop")
    other_app, app = Workspace("/old/app", "app"), Workspace("/code/app", "app")
    store.create("回答一律使用中文", "rule", now)
    store.create("所有服务的日志都进 Loki", "project", now)
    store.create("提交前先跑 make lint", "rule", now, workspace=pay)
    store.create("支付服务本地端口是 8443", "project", now, workspace=pay)
    store.create("商城图片放在 shop-img 桶", "project", now, workspace=shop)
    check = doctor.check_data(paths)
    assert check.ok is True
    assert check.summary.endswith(
        "；共 5 条记忆（所有项目：rule 1 条、project 1 条；pay-service：rule 1 条、project 1 条；"
        "shop：project 1 条）"
    )
    # Two workspaces with one name are told apart by their paths.
    store.create("应用的入口是 main.py", "project", now, workspace=app)
    store.create("旧应用的入口是 run.py", "project", now, workspace=other_app)
    summary = doctor.check_data(paths).summary
    assert "app（/code/app）：project 1 条；app（/old/app）：project 1 条；pay-service：" in summary
    # A quarantined line is a problem; the counts of what did load still show.
    with open(paths.group_file("rule"), "a", encoding="utf-8") as handle:
        handle.write("{broken\n")
    broken = doctor.check_data(paths)
    assert broken.ok is False and "无法读取" in broken.summary and "共 7 条记忆（所有项目：" in broken.summary
