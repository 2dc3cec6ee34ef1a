"""``memself views status|fill``: every memory's "applies when" requests, asked in the background."""

from __future__ import annotations

import click

from memself.cli.app import echo_json, main, now_utc
from memself.errors import MemselfError

_STOPPED = {
    "limit": "已到 --limit 的条数",
    "budget": "今天的额度用完了，剩下的明天继续（memself config viewsDailyRequests / viewsDailyTokens 可调）",
    "endpoint-error": "接口出错，这一批没有写入任何内容，之后会重试",
    "state-unreadable": "views/state.json 无法读取，已另存并把今天的额度记为用完，明天重新开始",
}


@main.group("views")
def views_group() -> None:
    """适用场景：为没有适用场景的记忆在后台补写（按每日额度）。"""


@views_group.command("status")
@click.option("--json", "as_json", is_flag=True, help="输出 JSON")
def views_status(as_json: bool) -> None:
    """多少记忆已有适用场景、多少在等待、今天的额度和用量。"""
    from memself.config import load_config
    from memself.paths import DataPaths
    from memself.views.status import coverage, render_text, to_json

    paths = DataPaths.default()
    config = load_config(paths)
    cov = coverage(paths, config, now_utc())
    if as_json:
        echo_json(to_json(cov))
        return
    for line in render_text(cov, config.model):
        click.echo(line)


@views_group.command("fill")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="这次最多补写多少条记忆")
@click.option("--dry-run", is_flag=True, help="只显示会发送的内容（已隐去密钥），什么也不发送")
def views_fill(limit: int | None, dry_run: bool) -> None:
    """按今天的额度向旁路判别接口请求适用场景，分批发送。"""
    from memself.config import load_config
    from memself.judge.credentials import shown_base
    from memself.paths import DataPaths
    from memself.views.fill import (
        BUSY,
        ENDPOINT_ERROR,
        KEY,
        NO_ENDPOINT,
        STATE,
        dump_body,
        endpoint_configured,
        run_fill,
    )

    paths = DataPaths.default()
    config = load_config(paths)
    report = run_fill(paths, config, now_utc, limit=limit, dry_run=dry_run)
    if dry_run:
        if endpoint_configured(config):
            target = shown_base(str(config.sideApiBase)).rstrip("/") + "/chat/completions"
            click.echo(f"演练：以下 {report.requests} 个请求会发往 {target}（密钥只在请求头里，不显示）")
        else:
            click.echo(f"演练：没有配置旁路判别接口，配置后会发送以下 {report.requests} 个请求")
        for i, body in enumerate(report.bodies, 1):
            click.echo(f"--- 第 {i} 个请求 ---")
            click.echo(dump_body(body))
        if report.stopped == "budget":
            click.echo(_STOPPED["budget"])
        click.echo("演练结束：什么也没有发送，什么也没有写入")
        return
    if report.stopped == BUSY:
        raise MemselfError("另一个补写适用场景的进程正在运行，请稍后再试")
    if report.stopped == NO_ENDPOINT:
        raise MemselfError(
            "没有配置旁路判别接口，什么也没有发送"
            + (f"：{report.detail}" if report.detail else "")
            + "（memself setup，或 memself config sideApiBase/sideApiModel 后运行 memself key set）"
        )
    if report.stopped == KEY:
        raise MemselfError(f"{report.detail}（memself key set 重新输入 apiKey）")
    click.echo(f"发送了 {report.requests} 个请求，{len(report.filled)} 条记忆补上了适用场景")
    faults = (ENDPOINT_ERROR, STATE)
    if report.stopped in _STOPPED and report.stopped not in faults:
        click.echo(_STOPPED[report.stopped])
    # What was filled stays filled; the exit code says not everything asked for was done.
    unfinished = []
    if report.failed:
        left = "、".join(report.failed)
        unfinished.append(f"{len(report.failed)} 条记忆这次没拿到可用结果（明天再试）：{left}")
    if report.stopped in faults:
        detail = f"：{report.detail}" if report.detail and report.stopped == ENDPOINT_ERROR else ""
        unfinished.append(_STOPPED[report.stopped] + detail)
    if unfinished:
        raise MemselfError("；".join(unfinished))
