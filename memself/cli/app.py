"""The click group every command module registers on, the one place errors become exit 1, and
the one place click's own words (help chrome, usage errors) become Chinese (``click_zh``)."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from typing import Any

import click

from memself.cli.click_zh import ABORTED, ZhHelpFormatter, to_chinese
from memself.errors import MemselfError


class MemselfContext(click.Context):
    formatter_class = ZhHelpFormatter


class MemselfCommand(click.Command):
    """Every memself command: its help page is formatted by ``ZhHelpFormatter``."""

    context_class = MemselfContext

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            raise to_chinese(exc, ctx) from exc


class MemselfSubgroup(click.Group):
    """A group under ``memself`` (``engine``, ``key``...): the same context for it and its commands."""

    context_class = MemselfContext
    command_class = MemselfCommand
    group_class: type[click.Group | type] | None = type

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            raise to_chinese(exc, ctx) from exc


class MemselfGroup(MemselfSubgroup):
    """``memself`` itself. Every parse and every run of a command below passes through its
    ``make_context`` and ``invoke``, so click's errors are made Chinese here, once; expected
    failures become one clear Chinese line on stderr and exit 1, never a traceback."""

    group_class = MemselfSubgroup

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.ClickException as exc:
            raise to_chinese(exc) from exc

    def invoke(self, ctx: click.Context) -> Any:
        from memself.platform.console import tolerate_narrow_encodings

        tolerate_narrow_encodings()
        try:
            return super().invoke(ctx)
        except click.ClickException as exc:
            raise to_chinese(exc) from exc
        except (click.Abort, KeyboardInterrupt, EOFError):
            # click would say "Aborted!"; a ^C or a closed stdin at a prompt ends here instead.
            click.echo(f"\n{ABORTED}", err=True)
            sys.exit(1)
        except MemselfError as exc:
            click.echo(f"错误：{exc}", err=True)
            sys.exit(1)
        except OSError as exc:
            click.echo(f"错误：{exc.strerror or exc}（{getattr(exc, 'filename', '') or ''}）", err=True)
            sys.exit(1)


@click.group(cls=MemselfGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(
    package_name="memself", prog_name="memself", message="%(prog)s 版本 %(version)s", help="显示版本并退出"
)
def main() -> None:
    """memself：给 AI 编程助手用的自进化长期记忆。"""


def now_utc() -> datetime:
    """The CLI is the edge of the program: the one place that reads the clock for the core."""
    return datetime.now(timezone.utc)


def echo_json(data: object) -> None:
    click.echo(json.dumps(data, ensure_ascii=False, indent=2))
