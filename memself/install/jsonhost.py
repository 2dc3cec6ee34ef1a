"""A host registered entirely through JSON files in its config folder (hooks, MCP, skill).

Cursor, CodeBuddy and WorkBuddy are instances; Claude Code extends it (MCP through its CLI,
and the permission rule).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal

import memself.install.entries as entries
from memself.hook.command import hook_command_agent
from memself.hosts import HOSTS
from memself.hosts.base import EventKind, HostAdapter
from memself.install.base import (
    SKILL_NAME,
    InstallContext,
    JsonEditStep,
    JsonRemovalStep,
    SkillCopyStep,
    SkillRemovalStep,
    Step,
    StepResult,
    run_steps,
)
from memself.install.jsonfile import Transform

# A hooks file read on the hook path is read this far at most.
_HOOKS_FILE_MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class JsonHostInstaller:
    name: str
    label: str
    config_dir: str  # relative to HOME, e.g. ".cursor"
    hooks_file: str  # relative to the config folder
    hook_shape: Literal["nested", "flat"]
    mcp_file: str | None  # where we register the MCP server, relative to the config folder
    # Files where an earlier registration of ours may sit (the original plugin's choice): an entry
    # there is kept pointing at the current server, and removed on uninstall; none is added.
    other_mcp_files: tuple[str, ...] = ()
    # The host reads its MCP servers from the first of these files that exists (then ours goes
    # there; ``mcp_file`` is created when none does). Empty: always ``mcp_file``.
    mcp_read_order: tuple[str, ...] = ()
    # An environment variable naming the config folder in place of ``config_dir``, and folders
    # (relative to HOME) it is ignored for because they belong to another host.
    config_env: str | None = None
    config_env_ignored: tuple[str, ...] = ()
    # Extra fields of a flat hook entry, per event (Cursor's ``loop_limit``).
    hook_fields: Mapping[EventKind, Mapping[str, Any]] = field(default_factory=dict)

    def config_root(self, home: Path) -> Path:
        named = os.environ.get(self.config_env, "").strip() if self.config_env else ""
        if named:
            folder = Path(named).expanduser()
            if all(not _same_folder(folder, home / other) for other in self.config_env_ignored):
                return folder
        return home / self.config_dir

    def mcp_target(self, root: Path) -> str | None:
        """The MCP file ours is registered in: the one the host reads."""
        existing = [name for name in self.mcp_read_order if (root / name).is_file()]
        return existing[0] if existing else self.mcp_file

    def detect(self, home: Path) -> bool:
        return self.config_root(home).is_dir()

    def skill_dir(self, home: Path) -> Path:
        return self.config_root(home) / "skills" / SKILL_NAME

    def hook_registered(self, home: Path) -> bool:
        """Whether this host's hooks file holds a hook of ours (or the original plugin's) for this
        host. Asked on the hook path (a hook registered for another host that this one also runs),
        so it reads a bounded prefix and never raises."""
        try:
            with (self.config_root(home) / self.hooks_file).open("rb") as fh:
                data = json.loads(fh.read(_HOOKS_FILE_MAX_BYTES).decode("utf-8-sig"))
        except (OSError, ValueError, RecursionError):
            return False
        return any(hook_command_agent(c) == self.name for c in entries.hook_commands(data, self.hook_shape))

    def hooks_purpose(self) -> str:
        return "hook（" + "、".join(HOSTS[self.name].EVENT_NAMES.values()) + "）"

    # ---- what goes into the hooks file

    def registrations(self, ctx: InstallContext) -> list[entries.Registration]:
        """One hook per event the host's adapter handles, with the timeout the adapter names:
        the adapter's table is the only place these live."""
        adapter = HOSTS[self.name]
        return [
            entries.Registration(
                name, adapter.TIMEOUTS[kind], ctx.hook_command(self.name, kind), _shell_field(adapter)
            )
            for kind, name in adapter.EVENT_NAMES.items()
        ]

    def _hook_install(self, ctx: InstallContext) -> list[Transform]:
        registrations = self.registrations(ctx)
        names = HOSTS[self.name].EVENT_NAMES
        fields = {names[kind]: extra for kind, extra in self.hook_fields.items()}

        def install_hooks(data: dict[str, Any], path: Path) -> dict[str, Any]:
            if self.hook_shape == "nested":
                return entries.upsert_nested_hooks(data, path, registrations)
            return entries.upsert_flat_hooks(data, path, registrations, fields)

        return [install_hooks]

    def _hook_removal(self, ctx: InstallContext) -> list[Transform]:
        del ctx
        return [entries.remove_nested_hooks if self.hook_shape == "nested" else entries.remove_flat_hooks]

    def _hooks_file_install(self, ctx: InstallContext) -> tuple[str, list[Transform]]:
        return self.hooks_purpose(), self._hook_install(ctx)

    def _hooks_file_removal(self, ctx: InstallContext) -> tuple[str, list[Transform], list[Transform]]:
        return self.hooks_purpose(), self._hook_removal(ctx), self._hook_install(ctx)

    # ---- MCP

    def _mcp_steps(self, ctx: InstallContext) -> list[Step]:
        command = ctx.mcp_command(self.name)
        root = self.config_root(ctx.home)
        target = self.mcp_target(root)
        steps: list[Step] = []
        if target:
            steps.append(
                JsonEditStep(
                    root / target,
                    f"MCP（{entries.SERVER_NAME}）",
                    [partial(_mcp_upsert, command=command)],
                )
            )
        for name in dict.fromkeys((self.mcp_file, *self.other_mcp_files)):
            path = root / name if name else None
            if name != target and path is not None and path.exists():
                steps.append(
                    JsonEditStep(
                        path, f"MCP（{entries.SERVER_NAME}，旧位置）", [partial(_mcp_update, command=command)]
                    )
                )
        return steps

    def _mcp_removal_steps(self, ctx: InstallContext) -> list[Step]:
        command = ctx.mcp_command(self.name)
        root = self.config_root(ctx.home)
        names = list(dict.fromkeys(([self.mcp_file] if self.mcp_file else []) + list(self.other_mcp_files)))
        return [
            JsonRemovalStep(
                root / name,
                f"MCP（{entries.SERVER_NAME}）",
                [entries.remove_mcp],
                [partial(_mcp_upsert, command=command)],
            )
            for name in names
            if (root / name).exists()
        ]

    # ---- the interface

    def plan(self, ctx: InstallContext) -> list[Step]:
        root = self.config_root(ctx.home)
        purpose, transforms = self._hooks_file_install(ctx)
        return [
            JsonEditStep(root / self.hooks_file, purpose, transforms),
            *self._mcp_steps(ctx),
            SkillCopyStep(ctx.skill_source, self.skill_dir(ctx.home)),
        ]

    def plan_removal(self, ctx: InstallContext) -> list[Step]:
        root = self.config_root(ctx.home)
        steps: list[Step] = []
        hooks_path = root / self.hooks_file
        if hooks_path.exists():
            purpose, removals, installs = self._hooks_file_removal(ctx)
            steps.append(JsonRemovalStep(hooks_path, purpose, removals, installs))
        steps.extend(self._mcp_removal_steps(ctx))
        steps.append(SkillRemovalStep(self.skill_dir(ctx.home)))
        return steps

    def apply(self, ctx: InstallContext) -> list[StepResult]:
        return run_steps(self.plan(ctx))

    def remove(self, ctx: InstallContext) -> list[StepResult]:
        return run_steps(self.plan_removal(ctx))


def _same_folder(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


def _mcp_upsert(data: dict[str, Any], path: Path, *, command: list[str]) -> dict[str, Any]:
    return entries.upsert_mcp(data, path, command)


def _mcp_update(data: dict[str, Any], path: Path, *, command: list[str]) -> dict[str, Any]:
    return entries.update_mcp_if_present(data, path, command)


def _shell_field(adapter: HostAdapter) -> str | None:
    """The "shell" of a hook entry: named only where the host has the field and its default
    shell on this system is not the one our command is written for (Windows)."""
    from memself.platform import system

    if not adapter.HOOK_SHELL_FIELD or system.real_name() != "windows":
        return None
    return adapter.HOOK_SHELLS["windows"]
