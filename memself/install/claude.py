"""Claude Code: hooks and the optional permission rule in ``~/.claude/settings.json``, the MCP
server through ``claude mcp add --scope user`` (``~/.claude.json``), the skill in
``~/.claude/skills``. Desktop app and CLI share ``~/.claude``, so one registration serves both.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import memself.install.claude_cli as claude_cli
import memself.install.entries as entries
from memself.install.base import InstallContext, Step, StepResult
from memself.install.jsonfile import Transform
from memself.install.jsonhost import JsonHostInstaller

_CLI_TIMEOUT_S = 60
_PURPOSE = f"MCP（{entries.SERVER_NAME}，用户级）"
_NO_CLAUDE = (
    "memself 找不到 claude 命令，无法代为注册；也可以用环境变量 "
    f"{claude_cli.BIN_ENV} 指明 claude 的路径后运行 memself setup --only claude"
)


@dataclass(frozen=True)
class ClaudeMcpStep:
    """Register (or unregister) our server with the ``claude`` CLI, or print the command."""

    home: Path
    command: tuple[str, ...]
    claude: str | None
    removing: bool = False

    @property
    def target(self) -> str:
        return str(claude_cli.state_file(self.home))

    def _argvs(self, claude: str) -> list[list[str]]:
        current = claude_cli.registered_entry(self.home)
        if self.removing:
            return [claude_cli.remove_argv(claude)] if current is not None else []
        if claude_cli.matches(current, self.command):
            return []
        steps = [claude_cli.remove_argv(claude)] if current is not None else []
        return [*steps, claude_cli.add_argv(claude, self.command)]

    def preview(self) -> StepResult:
        argvs = self._argvs(self.claude or "claude")
        if not argvs:
            detail = "未注册" if self.removing else "已注册，无需改动"
            return StepResult(self.target, _PURPOSE, False, detail)
        lines = "\n".join(claude_cli.shell_line(argv) for argv in argvs)
        if self.claude:
            return StepResult(self.target, _PURPOSE, True, f"将运行：\n{lines}", diff="")
        return StepResult(
            self.target,
            _PURPOSE,
            True,
            f"未找到 claude 命令，需要你手动运行：\n{lines}",
            diff="",
            manual=lines,
            manual_why=_NO_CLAUDE,
        )

    def run(self) -> StepResult:
        argvs = self._argvs(self.claude or "claude")
        if not argvs:
            return self.preview()
        manual = "\n".join(claude_cli.shell_line(argv) for argv in argvs)
        if self.claude is None:
            return StepResult(
                self.target,
                _PURPOSE,
                False,
                f"未找到 claude 命令（可用环境变量 {claude_cli.BIN_ENV} 指明路径）",
                manual=manual,
            )
        for argv in argvs:
            try:
                done = subprocess.run(
                    argv,
                    capture_output=True,
                    text=True,
                    encoding="utf-8",
                    errors="replace",
                    timeout=_CLI_TIMEOUT_S,
                    stdin=subprocess.DEVNULL,
                    check=False,
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                return StepResult(self.target, _PURPOSE, False, f"运行 claude 失败：{exc}", manual=manual)
            if done.returncode != 0:
                reason = " ".join((done.stderr or done.stdout).split())[:300]
                return StepResult(
                    self.target,
                    _PURPOSE,
                    False,
                    f"claude mcp 失败（退出码 {done.returncode}）：{reason}",
                    manual=manual,
                )
        detail = "已通过 claude mcp remove 移除" if self.removing else "已通过 claude mcp add 注册"
        return StepResult(self.target, _PURPOSE, True, detail)


@dataclass(frozen=True)
class ClaudeInstaller(JsonHostInstaller):
    def _rule_present(self, home: Path) -> bool:
        """Whether settings.json holds the permission rule now; the report names the rule only
        when it is there to remove (or was added). A file that cannot be read counts as not
        holding it: the step itself refuses that file."""
        try:
            data = json.loads((self.config_root(home) / self.hooks_file).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        permissions = data.get("permissions") if isinstance(data, dict) else None
        allow = permissions.get("allow") if isinstance(permissions, dict) else None
        return isinstance(allow, list) and entries.RESOLVE_RULE in allow

    def _permission(self, ctx: InstallContext) -> tuple[str, list[Transform]]:
        if ctx.allow_resolve is True:
            return f"、免批准规则 {entries.RESOLVE_RULE}", [entries.add_allow_rule]
        if ctx.allow_resolve is False and self._rule_present(ctx.home):
            return f"、去掉免批准规则 {entries.RESOLVE_RULE}", [entries.remove_allow_rule]
        return "", []

    def _hooks_file_install(self, ctx: InstallContext) -> tuple[str, list[Transform]]:
        extra, transforms = self._permission(ctx)
        return self.hooks_purpose() + extra, [*self._hook_install(ctx), *transforms]

    def _hooks_file_removal(self, ctx: InstallContext) -> tuple[str, list[Transform], list[Transform]]:
        purpose = self.hooks_purpose()
        if self._rule_present(ctx.home):
            purpose += f"、免批准规则 {entries.RESOLVE_RULE}"
        removals = [*self._hook_removal(ctx), entries.remove_allow_rule]
        installs = [*self._hook_install(ctx), entries.add_allow_rule]
        return purpose, removals, installs

    def _mcp_steps(self, ctx: InstallContext) -> list[Step]:
        return [ClaudeMcpStep(ctx.home, tuple(ctx.mcp_command(self.name)), ctx.claude_bin)]

    def _mcp_removal_steps(self, ctx: InstallContext) -> list[Step]:
        return [ClaudeMcpStep(ctx.home, tuple(ctx.mcp_command(self.name)), ctx.claude_bin, removing=True)]
