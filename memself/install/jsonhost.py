"""A host registered entirely through JSON files in its config folder (hooks, MCP, skill).

Cursor, CodeBuddy and WorkBuddy are instances; Claude Code extends it (MCP through its CLI,
and the permission rule). Which one a host gets is its facts' ``mcp.via``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal

import memself.install.entries as entries
from memself.hook.registered import hook_registered
from memself.hosts import HOSTS
from memself.hosts.base import EventKind, HostAdapter
from memself.hosts.facts import HostFacts
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


@dataclass(frozen=True)
class JsonHostInstaller:
    """Registers memself in a host from its facts (``memself.hosts.facts``): nothing about a host
    is stated here."""

    facts: HostFacts

    @property
    def name(self) -> str:
        return self.facts.name

    @property
    def label(self) -> str:
        return self.facts.label

    @property
    def hooks_file(self) -> str:
        return self.facts.hooks_file

    @property
    def hook_shape(self) -> Literal["nested", "flat"]:
        return self.facts.hook_shape

    @property
    def mcp_file(self) -> str | None:
        return self.facts.mcp_file

    @property
    def other_mcp_files(self) -> tuple[str, ...]:
        return self.facts.other_mcp_files

    @property
    def mcp_read_order(self) -> tuple[str, ...]:
        return self.facts.mcp_read_order

    @property
    def hook_fields(self) -> Mapping[EventKind, Mapping[str, Any]]:
        return self.facts.hook_fields

    def config_root(self, home: Path) -> Path:
        return self.facts.config_root(home)

    def mcp_target(self, root: Path) -> str | None:
        """The MCP file ours is registered in: the one the host reads."""
        existing = [name for name in self.mcp_read_order if (root / name).is_file()]
        return existing[0] if existing else self.mcp_file

    def detect(self, home: Path) -> bool:
        return self.config_root(home).is_dir()

    def skill_dir(self, home: Path) -> Path:
        return self.config_root(home) / "skills" / SKILL_NAME

    def hook_registered(self, home: Path) -> bool:
        return hook_registered(self.facts, home)

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
