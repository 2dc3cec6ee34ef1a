"""``memself setup``, ``memself uninstall``, ``memself doctor``: thin glue over memself.install."""

from __future__ import annotations

import sys

import click

from memself.cli.app import main
from memself.errors import MemselfError
from memself.install import INSTALLERS

_HOSTS = click.Choice(list(INSTALLERS))


class ClickPrompter:
    """Terminal questions for setup (used only when a terminal is attached)."""

    def ask(self, question: str, default: str = "") -> str:
        return str(click.prompt(question, default=default, show_default=bool(default)))

    def secret(self, question: str) -> str:
        return str(click.prompt(question, default="", show_default=False, hide_input=True))

    def confirm(self, question: str, default: bool) -> bool:
        return click.confirm(question, default=default)


def _has_terminal() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty()


@main.command()
@click.argument("mode", required=False, type=click.Choice(["sidepath", "blocking"]))
@click.option("--only", type=_HOSTS, help="只注册这一端，不提问，不碰其它客户端的文件")
@click.option("--dry-run", is_flag=True, help="只打印每个文件将要发生的改动（diff），不写入")
def setup(mode: str | None, only: str | None, dry_run: bool) -> None:
    """准备向量模型，并把 hook、MCP 和 skill 注册进本机已安装的客户端。

    MODE 为 sidepath 时不提问，重新注册并把旧的阻塞模式配置改为旁路。
    """
    from memself.install.setup_flow import SetupOptions, run_setup

    if mode == "blocking":
        raise MemselfError(
            "阻塞模式已经移除，记忆只经旁路判别沉淀；请运行 memself setup 或 memself setup sidepath"
        )
    options = SetupOptions(
        only=only, dry_run=dry_run, sidepath=mode == "sidepath", interactive=_has_terminal()
    )
    sys.exit(run_setup(options, ClickPrompter(), click.echo))


@main.command()
@click.option("--only", type=_HOSTS, help="只去掉这一端的 hook、MCP 和 skill；配置和其它客户端不动")
@click.option("--dry-run", is_flag=True, help="只打印将要发生的改动，不写入")
@click.option(
    "--purge", is_flag=True, help="还删除模型缓存、索引和日志、召回进程的运行文件和命令链接；记忆始终保留"
)
def uninstall(only: str | None, dry_run: bool, purge: bool) -> None:
    """去掉各端里本插件的 hook、MCP、skill 和免批准规则；不带 --only 时还删除配置和密钥，保留记忆。"""
    from memself.install.uninstall import run_uninstall

    sys.exit(run_uninstall(only, dry_run, click.echo, purge=purge))


@main.command()
def doctor() -> None:
    """一屏检查：各端注册、向量模型、召回进程、判别接口，以及每个问题怎么修。"""
    from memself.doctor import run_doctor

    sys.exit(run_doctor(click.echo, confirm=_confirm_key_address if _has_terminal() else None))


def _confirm_key_address(address: str) -> bool:
    click.echo(f"apiKey 是原插件的格式，还没有确认可以发往哪个地址。当前的判别接口地址是：{address}")
    return bool(click.confirm("这是你自己填写、信任的地址吗？确认后 apiKey 只会发往这个地址", default=False))
