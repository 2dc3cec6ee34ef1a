"""``memself hook --agent HOST``: the slow twin of ``memself/hooks/entry.py`` (same function,
``memself.hook.process.main``, after the full CLI start-up). Installers register the fast entry;
this one is for people running a hook by hand."""

from __future__ import annotations

import sys

import click

from memself.cli.app import main
from memself.hosts import HOSTS


@main.command("hook", hidden=True)
@click.option(
    "--agent", "host", default="", metavar="|".join(HOSTS), help="哪个客户端调用的 hook：" + "、".join(HOSTS)
)
def hook_cmd(host: str) -> None:
    """读 stdin 的 hook 事件，输出该客户端要的 JSON；无论发生什么都以 0 退出。"""
    from memself.hook.deadline import arm
    from memself.hook.process import main as run_hook

    arm(host.strip().lower())  # the hook's hard deadline, counted from this process's start
    # Not click.Choice: a usage error would exit 2, which a host may read as "block the prompt".
    run_hook(["--agent", host])
    sys.stdout.flush()
    sys.exit(0)
