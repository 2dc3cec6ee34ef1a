"""The one interface every host installer implements, and the steps they are made of.

A host installer turns an ``InstallContext`` into a list of ``Step``s (``plan`` /
``plan_removal``). A step can ``preview`` itself (what would change, as a unified diff; nothing is
written) and ``run``. ``apply`` and ``remove`` preview every step first, so a malformed file
anywhere in a host stops that host before any of its files is written.
"""

from __future__ import annotations

import difflib
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import memself.install.entries as entries
import memself.install.jsonfile as jsonfile
from memself.errors import MemselfError
from memself.hosts.base import EventKind
from memself.shipped import shipped_dir

SKILL_NAME = "memory-self-evolution-manage"


def default_skill_source() -> Path:

    return shipped_dir("installers") / "skills" / SKILL_NAME


def default_hook_command(host: str, kind: EventKind) -> str:
    from memself.hook.command import hook_command_line

    return hook_command_line(host, kind)


@dataclass(frozen=True)
class InstallContext:
    """Everything an installer needs from outside; tests replace any part of it."""

    home: Path
    skill_source: Path = field(default_factory=default_skill_source)
    allow_resolve: bool | None = None  # Claude's permission rule: add, remove, or leave alone
    claude_bin: str | None = None  # resolved by the caller (memself.install.claude_cli)
    hook_command: Callable[[str, EventKind], str] = default_hook_command  # one per host and event
    mcp_command: Callable[[str], list[str]] = entries.mcp_command


@dataclass(frozen=True)
class StepResult:
    """What one step did or would do, for the per-file report (Chinese ``detail``)."""

    target: str  # a file path, or what a command acts on
    purpose: str  # what of ours lives there, e.g. "hook（SessionStart、UserPromptSubmit、Stop）"
    changed: bool
    detail: str
    diff: str = ""
    manual: str = ""  # a command the user has to run, when we could not do it ourselves
    manual_why: str = ""  # with ``manual``: why we could not, and what would let us


class Step(Protocol):
    def preview(self) -> StepResult: ...

    def run(self) -> StepResult: ...


def unified_diff(path: Path, before: bytes | None, after: bytes | None) -> str:
    old = (before or b"").decode("utf-8", errors="replace").splitlines(keepends=True)
    new = (after or b"").decode("utf-8", errors="replace").splitlines(keepends=True)
    lines = difflib.unified_diff(
        old,
        new,
        fromfile=f"{path}（原）" if before is not None else "/dev/null",
        tofile=f"{path}（新）" if after is not None else "/dev/null",
    )
    return "".join(line if line.endswith("\n") else line + "\n\\ 文件末尾没有换行\n" for line in lines)


def _describe(outcome: jsonfile.Outcome) -> str:
    if not outcome.changed:
        return "无需改动"
    if outcome.before is None:
        return "已新建"
    if outcome.after is None:
        return "已删除（其中只有本插件的内容）"
    return "已更新"


@dataclass(frozen=True)
class JsonEditStep:
    path: Path
    purpose: str
    transforms: Sequence[jsonfile.Transform]

    def _transform(self, data: dict[str, Any], path: Path) -> dict[str, Any]:
        for transform in self.transforms:
            data = transform(data, path)
        return data

    def preview(self) -> StepResult:
        return self._result(jsonfile.preview_edit(self.path, self._transform), dry=True)

    def run(self) -> StepResult:
        return self._result(jsonfile.apply_edit(self.path, self._transform), dry=False)

    def _result(self, outcome: jsonfile.Outcome, dry: bool) -> StepResult:
        detail = _describe(outcome)
        if dry and outcome.changed:
            detail = "将" + detail.removeprefix("已")
        return StepResult(
            str(self.path),
            self.purpose,
            outcome.changed,
            detail,
            unified_diff(self.path, outcome.before, outcome.after),
        )


@dataclass(frozen=True)
class JsonRemovalStep:
    path: Path
    purpose: str
    removals: Sequence[jsonfile.Transform]
    installs: Sequence[jsonfile.Transform]  # what install would add, to recognise a file of ours

    def _remove(self, data: dict[str, Any], path: Path) -> dict[str, Any]:
        for transform in self.removals:
            data = transform(data, path)
        return data

    def _install(self, data: dict[str, Any], path: Path) -> dict[str, Any]:
        for transform in self.installs:
            data = transform(data, path)
        return data

    def preview(self) -> StepResult:
        outcome = jsonfile.preview_removal(self.path, self._remove, self._install)
        return self._result(outcome, dry=True)

    def run(self) -> StepResult:
        return self._result(jsonfile.apply_removal(self.path, self._remove, self._install), dry=False)

    def _result(self, outcome: jsonfile.Outcome, dry: bool) -> StepResult:
        if not outcome.changed:
            detail = "没有本插件的内容" if outcome.before is not None else "文件不存在"
        elif outcome.after is None:
            detail = "删除（其中只有本插件的内容）" if dry else "已删除（其中只有本插件的内容）"
        else:
            detail = "移除本插件的条目" if dry else "已移除本插件的条目"
        return StepResult(
            str(self.path),
            self.purpose,
            outcome.changed,
            detail,
            unified_diff(self.path, outcome.before, outcome.after),
        )


def _tree(folder: Path) -> dict[str, bytes]:
    if not folder.is_dir():
        return {}
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@dataclass(frozen=True)
class SkillCopyStep:
    """Copy the skill folder; the target folder is ours entirely (its name is the marker)."""

    source: Path
    target: Path
    purpose: str = "skill（整理记忆）"

    def _source_files(self) -> dict[str, bytes]:
        files = _tree(self.source)
        if "SKILL.md" not in files:
            raise MemselfError(
                f"找不到 skill 源文件 {self.source / 'SKILL.md'}，安装包不完整；"
                f"请重新安装 memself 后再运行 memself setup"
            )
        return files

    def preview(self) -> StepResult:
        wanted, current = self._source_files(), _tree(self.target)
        changed = wanted != current
        diff = "".join(
            unified_diff(self.target / name, current.get(name), wanted.get(name))
            for name in sorted(set(wanted) | set(current))
            if current.get(name) != wanted.get(name)
        )
        detail = ("将新建" if not current else "将更新") if changed else "无需改动"
        return StepResult(str(self.target), self.purpose, changed, detail, diff)

    def run(self) -> StepResult:
        wanted, current = self._source_files(), _tree(self.target)
        if wanted == current:
            return StepResult(str(self.target), self.purpose, False, "无需改动")
        for name in set(current) - set(wanted):
            (self.target / name).unlink()
        for name, data in wanted.items():
            if current.get(name) != data:
                jsonfile.write_bytes_atomic(self.target / name, data)
        return StepResult(str(self.target), self.purpose, True, "已复制" if not current else "已更新")


@dataclass(frozen=True)
class SkillRemovalStep:
    target: Path
    purpose: str = "skill（整理记忆）"

    def preview(self) -> StepResult:
        exists = self.target.exists()
        diff = "".join(
            unified_diff(self.target / name, data, None) for name, data in _tree(self.target).items()
        )
        return StepResult(
            str(self.target), self.purpose, exists, "删除这个目录" if exists else "不存在", diff
        )

    def run(self) -> StepResult:
        if not self.target.exists():
            return StepResult(str(self.target), self.purpose, False, "不存在")
        shutil.rmtree(self.target)
        parent = self.target.parent
        # The skills folder itself, when we were its only content (we may have created it).
        if parent.name == "skills" and parent.is_dir() and not any(parent.iterdir()):
            parent.rmdir()
        return StepResult(str(self.target), self.purpose, True, "已删除")


def run_steps(steps: Sequence[Step]) -> list[StepResult]:
    """Preview every step (refusing malformed files before anything is written), then run."""
    for step in steps:
        step.preview()
    return [step.run() for step in steps]


def preview_steps(steps: Sequence[Step]) -> list[StepResult]:
    return [step.preview() for step in steps]


class HostInstaller(Protocol):
    """What ``memself/install/<host>.py`` exposes as ``INSTALLER`` (checked by a test)."""

    # Read-only: the installers are frozen dataclasses.
    @property
    def name(self) -> str: ...

    @property
    def label(self) -> str: ...

    def config_root(self, home: Path) -> Path: ...

    def detect(self, home: Path) -> bool: ...

    def hook_registered(self, home: Path) -> bool:
        """Whether the host's own config holds a hook of ours for it; never raises."""
        ...

    def plan(self, ctx: InstallContext) -> list[Step]: ...

    def plan_removal(self, ctx: InstallContext) -> list[Step]: ...

    def apply(self, ctx: InstallContext) -> list[StepResult]: ...

    def remove(self, ctx: InstallContext) -> list[StepResult]: ...
