"""``memself setup`` and ``memself uninstall``: the flows the CLI calls.

Setup, in the original's order: ask (only with a terminal, only for a full setup), write the
answers, prepare the embedding model (abort before registering if there is none), register in
every detected client, print what changed per file. ``--only HOST`` and ``sidepath`` ask nothing.
Uninstall removes exactly what setup added and, without ``--only``, the config and secrets,
keeping memories, trash, index, snapshot, decay state and verify cases.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from memself.engine.client import stop_engine_quietly
from memself.errors import MemselfError
from memself.install import INSTALLERS, context_for
from memself.install.base import InstallContext, StepResult, default_skill_source, preview_steps
from memself.install.base import run_steps as _run_steps
from memself.install.entries import RESOLVE_RULE
from memself.install.model_prep import ModelReady, prepare_model
from memself.paths import DataPaths
from memself.text.messages import RESOLVE_TOOL

Echo = Callable[[str], None]


class Prompter(Protocol):
    def ask(self, question: str, default: str = "") -> str: ...

    def secret(self, question: str) -> str: ...

    def confirm(self, question: str, default: bool) -> bool: ...


@dataclass(frozen=True)
class SetupOptions:
    only: str | None = None
    dry_run: bool = False
    sidepath: bool = False
    interactive: bool = False  # a terminal is attached (the CLI decides)


@dataclass
class Answers:
    confirm: bool | None = None
    api_base: str = ""
    api_key: str = ""
    api_model: str = ""
    allow_resolve: bool | None = None

    @property
    def has_api(self) -> bool:
        return bool(self.api_base and self.api_model and self.api_key)


@dataclass
class HostReport:
    host: str
    label: str
    results: list[StepResult] = field(default_factory=list)
    error: str = ""


def targets(home: Path, only: str | None) -> list[str]:
    if only is not None:
        if only not in INSTALLERS:
            raise MemselfError(f"未知客户端「{only}」，可用：{'、'.join(INSTALLERS)}")
        return [only]
    return [name for name, installer in INSTALLERS.items() if installer.detect(home)]


def ask_questions(prompter: Prompter, hosts: Sequence[str], echo: Echo) -> Answers:
    """Only what the seed README asks: popup or automatic, the judge API, Claude's permission."""
    answers = Answers()
    echo("新记忆写入前怎么处理？")
    echo("  1) 弹出确认，由你点选后再写（默认）")
    echo("  2) 自动追加，写入后告诉你结果")
    answers.confirm = prompter.ask("请选择 [1/2]", default="1").strip() != "2"
    echo("旁路判别接口（OpenAI 兼容的 chat/completions），三项都没有缺省值；输入 skip 跳过。")
    base = prompter.ask("baseUrl（如 https://api.example.com/v1）").strip()
    if base.lower() != "skip" and base:
        key = prompter.secret("apiKey（输入时不显示）").strip()
        model = "" if key.lower() == "skip" else prompter.ask("apiModel").strip()
        if key and key.lower() != "skip" and model and model.lower() != "skip":
            answers.api_base, answers.api_key, answers.api_model = base, key, model
        else:
            echo("已跳过判别接口，之后可以再配置。")
    if "claude" in hosts:
        echo(
            f"Claude Code 默认每次调用 MCP 工具都要你批准。可以只给 {RESOLVE_TOOL} 免批准（{RESOLVE_RULE}）："
        )
        echo("它只接收 sessionID 和你在弹窗里的选择，改不了记忆正文。")
        answers.allow_resolve = prompter.confirm(f"是否给 {RESOLVE_TOOL} 免批准？", default=False)
    return answers


def write_answers(paths: DataPaths, answers: Answers, echo: Echo) -> None:
    from memself.config import set_config_value

    if answers.confirm is not None:
        set_config_value(paths, "confirm", "true" if answers.confirm else "false")
        echo(f"  {paths.config}：confirm = {'true' if answers.confirm else 'false'}")
    if answers.has_api:
        from memself.judge.credentials import write_api_key

        set_config_value(paths, "sideApiBase", answers.api_base)
        set_config_value(paths, "sideApiModel", answers.api_model)
        write_api_key(paths, answers.api_key, answers.api_base)  # the key goes only there
        echo(f"  {paths.config}：sideApiBase、sideApiModel")
        echo(f"  {paths.side_secret}：apiKey（权限 600，只会发往 {answers.api_base}）")


def confirm_original_key(paths: DataPaths, prompter: Prompter, echo: Echo) -> None:
    """A key in the original's format goes nowhere until the user confirms the address it is
    for: asked here, showing the address, when setup kept the existing judge settings."""
    from memself.config import load_config
    from memself.judge.credentials import bind_key, read_key_file, shown_base

    base = str(load_config(paths).sideApiBase or "").strip()
    found = read_key_file(paths)
    if not base or found.state != "ok" or found.bound_base:
        return
    echo(f"已有的 apiKey 是原插件的格式，还没有确认可以发往哪个地址。当前的判别接口地址：{shown_base(base)}")
    if prompter.confirm("这是你自己填写、信任的地址吗？确认后 apiKey 只会发往这个地址", default=False):
        bind_key(paths, base)
        echo(f"  {paths.side_secret}：apiKey 只会发往 {shown_base(base)}")
    else:
        echo("没有确认，记忆沉淀保持暂停；之后可以运行 memself doctor 确认，或 memself key set 重新输入。")


def convert_legacy_blocking(paths: DataPaths, echo: Echo) -> None:
    """``sideJudge: false`` (the removed blocking mode) becomes the side path."""
    from memself.config import load_config, unset_config_value

    if load_config(paths).side_judge is False:
        unset_config_value(paths, "sideJudge")
        echo(f"  {paths.config}：去掉旧的阻塞模式设置 sideJudge=false，改走旁路判别")


def render_results(report: HostReport, echo: Echo, show_diff: bool, only_changed: bool = False) -> None:
    echo(f"{report.label}：")
    if report.error:
        echo(f"  未改动任何文件：{report.error}")
        return
    shown = [r for r in report.results if r.changed or r.manual or not only_changed]
    if not shown:
        echo("  没有本插件的内容")
    for result in shown:
        echo(f"  {result.target}")
        echo(f"    {result.purpose}：{result.detail}")
        if result.manual:
            echo("    请手动运行：")
            for line in result.manual.splitlines():
                echo(f"      {line}")
        if show_diff and result.diff:
            for line in result.diff.rstrip("\n").splitlines():
                echo(f"      {line}")


def register(
    hosts: Sequence[str], ctx: InstallContext, dry_run: bool, removing: bool = False
) -> list[HostReport]:
    reports = []
    for name in hosts:
        installer = INSTALLERS[name]
        report = HostReport(name, installer.label)
        try:
            steps = installer.plan_removal(ctx) if removing else installer.plan(ctx)
            report.results = preview_steps(steps) if dry_run else _run_steps(steps)
        except MemselfError as exc:
            report.error = str(exc)
        reports.append(report)
    return reports


def run_setup(
    opts: SetupOptions,
    prompter: Prompter,
    echo: Echo,
    *,
    home: Path | None = None,
    paths: DataPaths | None = None,
    skill_source: Path | None = None,
    prepare: Callable[[str, Echo], ModelReady] = prepare_model,
) -> int:
    """The whole of ``memself setup``; returns the exit code."""
    home = home or Path.home()
    paths = paths or DataPaths.default()
    move_old_data_dir(home, paths, opts.dry_run, echo)
    hosts = targets(home, opts.only)
    full = opts.only is None and not opts.sidepath
    if not hosts:
        echo(
            "没有检测到已安装的客户端（~/.cursor、~/.codebuddy、~/.workbuddy、~/.claude 都不存在）。"
            "装好客户端后重新运行 memself setup，或用 --only 指定一端。"
        )
    answers = Answers()
    if full and opts.interactive and not opts.dry_run:
        answers = ask_questions(prompter, hosts, echo)
    elif full and not opts.interactive:
        echo("没有终端：不提问，也不改已有配置；照常准备模型并注册。")

    if opts.dry_run:
        echo("（--dry-run：只显示将要做的改动，不写任何文件，也不准备模型）")
    else:
        if answers.confirm is not None or answers.has_api or opts.sidepath or (full and opts.interactive):
            echo("写入配置：")
            write_answers(paths, answers, echo)
            if opts.sidepath or (full and opts.interactive):
                convert_legacy_blocking(paths, echo)
            if full and opts.interactive and not answers.has_api:
                confirm_original_key(paths, prompter, echo)
        _prepare(paths, prepare, echo)

    ctx = context_for(
        home, skill_source=skill_source or default_skill_source(), allow_resolve=answers.allow_resolve
    )
    reports = register(hosts, ctx, opts.dry_run)
    echo("注册结果：" if not opts.dry_run else "将要做的改动：")
    for report in reports:
        render_results(report, echo, show_diff=opts.dry_run)
    _footer(hosts, reports, paths, echo, opts.dry_run)
    return 1 if any(r.error for r in reports) else 0


OLD_DATA_DIR = ".dsh-memory"  # where the plugin kept its memories before it was renamed


def move_old_data_dir(home: Path, paths: DataPaths, dry_run: bool, echo: Echo) -> None:
    """As the original's setup did: ``~/.dsh-memory`` becomes the data directory when there is
    none yet (never merged into an existing one)."""
    old = home / OLD_DATA_DIR
    if not old.is_dir() or old.is_symlink() or os.path.lexists(paths.root):
        return
    if dry_run:
        echo(f"将把 {old} 迁到 {paths.root}")
        return
    try:
        paths.root.parent.mkdir(parents=True, exist_ok=True)
        os.rename(old, paths.root)
    except OSError as exc:
        echo(f"没能把 {old} 迁到 {paths.root}（{exc.strerror or exc}），请手动移动后重新运行 memself setup")
        return
    echo(f"已把 {old} 迁到 {paths.root}")


def _prepare(paths: DataPaths, prepare: Callable[[str, Echo], ModelReady], echo: Echo) -> None:
    from memself.config import load_config, set_config_value

    model = load_config(paths).model
    ready = prepare(model, echo)
    if ready.fell_back:
        set_config_value(paths, "model", ready.model)
        # A running engine still holds the model that failed; the next hook starts a fresh one.
        stop_engine_quietly(paths)
        echo(
            f"  {paths.config}：model = {ready.model}（连上模型仓库后可改回："
            f"memself config model {model}，再运行 memself rebuild-index）"
        )
    echo(f"向量模型就绪：{ready.model}")


def _footer(
    hosts: Sequence[str], reports: Sequence[HostReport], paths: DataPaths, echo: Echo, dry_run: bool
) -> None:
    if dry_run or not hosts:
        return
    # A restart (or a new session) only where this run changed something.
    changed = {r.host: r.label for r in reports if not r.error and any(x.changed for x in r.results)}
    if changed:
        echo(f"注册完成后请重启 {'、'.join(changed.values())}，MCP 才会加载。")
    if "codebuddy" in changed:
        echo("CodeBuddy 在启动时读取 hook：请开一个新会话，必要时在 /hooks 里确认。")
    if "workbuddy" in changed:
        echo("WorkBuddy 会把新加的 MCP 显示为未启用：请在「连接器」里批准 memory-self-evolution。")
    try:
        from memself.config import load_config
        from memself.judge.start import deposition_status

        state = deposition_status(paths, load_config(paths))
    except MemselfError:
        state = "off"
    if state == "off":
        echo(
            "旁路判别接口还没配齐，不会沉淀新记忆（已有记忆照常注入和召回）。配置方法："
            "memself config sideApiBase <地址>、memself config sideApiModel <模型>，"
            "再运行 memself key set 输入 apiKey（或重新运行 memself setup）。"
        )
    elif state in ("paused-endpoint", "key-invalid"):
        echo(
            "旁路判别已暂停：apiKey 不能用于当前的 sideApiBase（memself key status 查看原因），"
            "运行 memself key set 重新输入 apiKey 后恢复。"
        )
    elif state == "paused-unconfirmed":
        echo(
            "旁路判别已暂停：apiKey 是原插件格式，还没有确认可以发往哪个地址；"
            "在终端运行 memself doctor 按提示确认，或运行 memself key set 重新输入 apiKey。"
        )
    elif state == "repaired":
        echo(
            f"本地会话密钥 {paths.session_secret} 内容无效，已另存为 session-secret.invalid-* "
            "并重新生成；之前未确认的记忆提案已失效。"
        )
    elif state == "secret-broken":
        echo(
            f"旁路判别已暂停：无法写入本地会话密钥 {paths.session_secret}（磁盘已满或目录不可写？），"
            "腾出空间后运行 memself doctor 确认。"
        )
