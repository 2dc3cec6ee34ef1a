"""``memself sync [init URL | status]``: one user's memories across machines, through git."""

from __future__ import annotations

import click

from memself.cli.app import main, now_utc


@main.group("sync", invoke_without_command=True)
@click.pass_context
def sync_group(ctx: click.Context) -> None:
    """通过 git 仓库在多台机器间同步记忆（不带子命令：拉取、合并、推送）。"""
    if ctx.invoked_subcommand is not None:
        return
    from memself.paths import DataPaths
    from memself.sync.run import sync

    result = sync(DataPaths.default(), now_utc())
    report = result.report
    click.echo("同步完成" + ("，已推送本机改动" if result.pushed else "，远端已是最新"))
    if report.added:
        click.echo(f"从其他机器新增 {len(report.added)} 条记忆")
    if report.removed:
        click.echo(f"按其他机器的删除移除了 {len(report.removed)} 条记忆（在各自的回收站里）")
    for mem_id in report.kept_edited:
        click.echo(f"记忆「{mem_id}」在一边被删除、在另一边被修改：已保留修改后的记忆")
    for mem_id, trashed in report.conflicts:
        click.echo(
            f"记忆「{mem_id}」在两边都被改了：保留较新的文字，另一版放进回收站"
            f"（memself restore {trashed} 可恢复）"
        )
    if result.quarantined:
        click.echo(
            f"同步仓库里有 {result.quarantined} 行无法读取，已原样存放到 sync/quarantine.jsonl，"
            "没有写入记忆库"
        )


@sync_group.command("init")
@click.argument("url")
def sync_init(url: str) -> None:
    """设置同步仓库（本地路径、ssh 或 https 地址均可），并做第一次同步。"""
    from memself.errors import MemselfError
    from memself.paths import DataPaths
    from memself.sync.run import init, sync

    paths = DataPaths.default()
    init(paths, url)
    click.echo(f"已设置同步仓库：{url}")
    try:
        sync(paths, now_utc())
    except MemselfError as exc:
        raise MemselfError(f"第一次同步没有完成：{exc}") from exc
    click.echo("第一次同步完成：记忆（规则、项目事实、回收站）已在同步仓库里；密钥、索引和日志不会同步")


@sync_group.command("status")
def sync_status() -> None:
    """上次同步的时间，以及还没推送的本机改动。"""
    from memself.paths import DataPaths
    from memself.sync.run import status

    info, pending = status(DataPaths.default())
    click.echo(f"同步仓库：{info.get('remote') or '（未设置）'}")
    click.echo(f"上次同步：{info.get('lastSync') or '从未同步'}")
    if info.get("lastError"):
        click.echo(f"上次尝试失败（{info.get('lastAttempt', '')}）：{info['lastError']}")
    if pending.total:
        click.echo(
            f"等待推送：新增 {pending.added} 条、修改 {pending.changed} 条、删除 {pending.deleted} 条记忆，"
            f"回收站变动 {pending.trash} 条"
        )
    else:
        click.echo("没有等待推送的本机改动")
