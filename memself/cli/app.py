"""The click group every command module registers on, and the one place errors become exit 1."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from typing import Any

import click

from memself.errors import MemselfError


class MemselfGroup(click.Group):
    """Maps expected failures to one clear Chinese line on stderr and exit 1, never a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        from memself.platform.console import tolerate_narrow_encodings

        tolerate_narrow_encodings()
        try:
            return super().invoke(ctx)
        except MemselfError as exc:
            click.echo(f"错误：{exc}", err=True)
            sys.exit(1)
        except OSError as exc:
            click.echo(f"错误：{exc.strerror or exc}（{getattr(exc, 'filename', '') or ''}）", err=True)
            sys.exit(1)


@click.group(cls=MemselfGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="memself", prog_name="memself")
def main() -> None:
    """memself：给 AI 编程助手用的自进化长期记忆。"""


def now_utc() -> datetime:
    """The CLI is the edge of the program: the one place that reads the clock for the core."""
    return datetime.now(timezone.utc)


def echo_json(data: object) -> None:
    click.echo(json.dumps(data, ensure_ascii=False, indent=2))
