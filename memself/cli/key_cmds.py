"""``memself key``: enter the judge's API key for an endpoint, and see what it is bound to.

The key is read from a hidden prompt (a terminal) or from stdin (a pipe), never from the command
line, where it would land in shell history and every process listing.
"""

from __future__ import annotations

import sys

import click

from memself.cli.app import main
from memself.config import load_config, set_config_value
from memself.errors import InvalidInput
from memself.judge.credentials import key_state, read_key_file, shown_base, write_api_key
from memself.paths import DataPaths


@main.group("key")
def key_group() -> None:
    """判别接口的 apiKey：录入时绑定到当前接口地址，只会发往这个地址。"""


def _valid_base(base: str) -> str:
    text = base.strip()
    scheme, sep, rest = text.partition("://")
    if not sep or scheme.lower() not in ("http", "https") or not rest.strip("/"):
        raise InvalidInput(f"接口地址需要以 http:// 或 https:// 开头，收到「{shown_base(text)}」")
    return text


def _read_key() -> str:
    if sys.stdin.isatty():
        return str(click.prompt("apiKey（输入时不显示）", hide_input=True, default="", show_default=False))
    return sys.stdin.readline()


@key_group.command("set")
@click.option("--base", help="同时把 sideApiBase 改为这个地址，密钥绑定到它")
def key_set(base: str | None) -> None:
    """重新输入 apiKey（隐藏输入，或从标准输入读一行），绑定到当前的 sideApiBase。"""
    paths = DataPaths.default()
    target = _valid_base(base) if base else str(load_config(paths).sideApiBase or "").strip()
    if not target:
        raise InvalidInput(
            "还没有判别接口地址：先运行 memself config sideApiBase <地址>，或用 memself key set --base <地址>"
        )
    _valid_base(target)
    key = _read_key().strip()
    if not key:
        raise InvalidInput("没有读到 apiKey，未做修改")
    if base:
        set_config_value(paths, "sideApiBase", target)
    write_api_key(paths, key, target)
    click.echo(f"apiKey 已保存到 {paths.side_secret}（权限 600），只会发往 {shown_base(target)}")


@key_group.command("status")
def key_status() -> None:
    """apiKey 是否已设置、绑定的接口地址，以及它和 sideApiBase 是否一致（不显示密钥）。"""
    paths = DataPaths.default()
    configured = str(load_config(paths).sideApiBase or "").strip()
    found = read_key_file(paths)
    click.echo(f"sideApiBase：{shown_base(configured) or '（未设置）'}")
    state = key_state(found, configured)
    if state == "missing":
        click.echo("apiKey：未设置。运行 memself key set 录入")
    elif state == "invalid":
        click.echo(f"apiKey：{paths.side_secret} {found.problem}。运行 memself key set 重新录入")
    elif state == "unbound":
        click.echo(
            "apiKey：已设置（原插件格式），还没有确认可以发往哪个地址，记忆沉淀已暂停。"
            "在终端运行 memself doctor 核对地址后确认，或运行 memself key set 重新输入"
        )
    elif state == "mismatch":
        click.echo(
            f"apiKey：绑定的是 {shown_base(found.bound_base)}，与 sideApiBase 不同，"
            "记忆沉淀已暂停。确认新地址可信后运行 memself key set 重新输入"
        )
    else:
        click.echo(f"apiKey：已设置，绑定 {shown_base(found.bound_base)}")
