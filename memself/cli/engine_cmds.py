"""``memself engine status|start|stop|serve``: look at and control the warm recall engine."""

from __future__ import annotations

import sys
import time
from typing import Any

import click

from memself.cli.app import echo_json, main
from memself.engine.client import (
    EngineClient,
    EngineRequestError,
    call_engine,
    engine_probe,
    stop_engine,
)
from memself.engine.protocol import ERR_NOT_READY, ERR_TIMEOUT, ERR_WARM_UP_FAILED, OP_PING
from memself.paths import DataPaths
from memself.text.messages import backlog_progress, model_problem_lines, reload_failed_line, sync_state_lines

STATE_TEXT = {"ready": "就绪", "loading": "正在加载模型", "failed": "加载失败"}
NOT_RUNNING = "召回引擎未运行（下次会话开始或提问时会自动启动）"
STATUS_TIMEOUT_S = 1.0
# An engine that holds its lock but could not answer ``status``: alive, and not to be restarted.
SILENT_TEXT = {
    "busy": "召回引擎运行中，但繁忙：所有连接都在处理请求",
    "unresponsive": f"召回引擎运行中，但 {STATUS_TIMEOUT_S:g} 秒内没有响应（可能正在处理一个很长的请求）",
    "starting": "召回引擎正在启动或正在退出",
}
SILENT_HINT = "  稍后再运行 memself engine status；一直如此时查看 memself.log，或运行 memself engine stop"


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds} 秒"
    if seconds < 3600:
        return f"{seconds // 60} 分 {seconds % 60} 秒"
    return f"{seconds // 3600} 小时 {seconds % 3600 // 60} 分"


def render_status(info: dict, same_code: bool) -> list[str]:
    """The lines ``engine status`` prints for a running engine."""
    state = STATE_TEXT.get(str(info.get("state")), str(info.get("state")))
    if info.get("error"):
        state += f"：{info['error']}"
    service = info.get("service")
    problem = service.get("model_problem") if isinstance(service, dict) else None
    if isinstance(problem, dict):
        state += "，但没有用上 config.json 里的向量模型（见下）"
    if info.get("reload_error"):
        state += "，但上次重新加载失败（见下）"
    transport = "Unix 套接字" if info.get("transport") == "unix" else "本机 TCP（带口令）"
    version = f"{info.get('version')}（" + (
        "与当前安装一致）" if same_code else "与当前安装不一致，下次召回时会自动重启）"
    )
    idle_limit = float(info.get("idle_limit_s") or 0)
    lines = [
        "召回引擎运行中",
        f"  进程      {info.get('pid')}",
        f"  版本      {version}",
        f"  状态      {state}",
        f"  地址      {info.get('address')}（{transport}）",
        f"  数据目录  {info.get('data_dir')}",
        f"  已运行    {_duration(float(info.get('uptime_s') or 0))}；"
        f"闲置 {_duration(float(info.get('idle_s') or 0))}，"
        f"闲置满 {_duration(idle_limit)}自动退出",
        f"  请求      {info.get('requests')} 次；数据变化后重新加载 {info.get('reloads')} 次",
    ]
    if info.get("warm_up_s") is not None:
        lines.append(f"  加载耗时  {info['warm_up_s']} 秒")
    backlog = service.get("backlog") if isinstance(service, dict) else None
    if isinstance(backlog, dict):
        lines.append(f"  后台编码  {backlog_progress(backlog)}")
    if isinstance(service, dict) and service.get("model"):
        lines.append(f"  向量模型  {service['model']}")
    if isinstance(problem, dict):
        lines += [f"  ⚠ {line}" for line in model_problem_lines(problem)]
    if info.get("reload_error"):
        lines.append(f"  ⚠ {reload_failed_line(str(info['reload_error']))}")
    fallback = info.get("runtime_fallback")
    if isinstance(fallback, dict):
        lines.append(
            f"  运行目录  {fallback.get('unsafe')} 不安全（{fallback.get('reason')}），"
            f"改用私有目录 {fallback.get('using')}"
        )
    return lines


def render_silent(info: dict) -> list[str]:
    """The lines for an engine that is there but did not answer (busy, hung, starting)."""
    pid = info.get("pid")
    head = SILENT_TEXT[str(info["state"])] + (f"（进程 {pid}）" if pid else "")
    return [head] if info["state"] == "starting" else [head, SILENT_HINT]


@main.group("engine")
def engine_group() -> None:
    """常驻召回引擎（持有向量模型和索引的本地进程）。"""


@engine_group.command("status")
@click.option("--json", "as_json", is_flag=True, help="输出 JSON")
def status_cmd(as_json: bool) -> None:
    """引擎是否在运行、版本、状态、闲置时间。"""
    paths = DataPaths.default()
    info = engine_probe(paths, STATUS_TIMEOUT_S)
    sync = _sync_state(paths)
    if as_json:
        echo_json({**info, "sync": sync})
        return
    if not info["running"]:
        lines = [NOT_RUNNING]
    elif info["state"] in SILENT_TEXT:
        lines = render_silent(info)
    else:
        lines = render_status(info, EngineClient(paths).matches(info))
    if sync is not None:
        lines += [f"  同步      {line}" for line in sync_state_lines(sync, sync["pending"])]
    for line in lines:
        click.echo(line)


def _sync_state(paths: DataPaths) -> dict[str, Any] | None:
    """The sync state and its pending changes (None: sync is not set up, or unreadable)."""
    from dataclasses import asdict

    from memself.errors import MemselfError
    from memself.sync.run import configured, status

    if not configured(paths):
        return None
    try:
        info, pending = status(paths)
    except MemselfError as exc:
        return {
            "remote": "",
            "lastError": str(exc),
            "pending": {"added": 0, "changed": 0, "deleted": 0, "trash": 0},
        }
    return {**info, "pending": asdict(pending)}


@engine_group.command("start")
@click.option(
    "--timeout",
    "timeout_s",
    type=float,
    default=120.0,
    show_default=True,
    help="最多等待多少秒（首次启动要加载模型）",
)
def start_cmd(timeout_s: float) -> None:
    """启动引擎并等到模型加载完毕。"""
    paths = DataPaths.default()
    deadline = time.monotonic() + timeout_s
    info = call_engine(paths, OP_PING, None, timeout_s)
    if not info.get("ready"):
        info = _wait_ready(EngineClient(paths), deadline)
    click.echo(f"召回引擎已就绪（进程 {info.get('pid')}）")
    service = (engine_probe(paths, STATUS_TIMEOUT_S).get("service") or {}) if info.get("ready") else {}
    problem = service.get("model_problem") if isinstance(service, dict) else None
    if isinstance(problem, dict):
        for line in model_problem_lines(problem):
            click.echo(f"注意：{line}", err=True)


def _wait_ready(client: EngineClient, deadline: float) -> dict:
    while True:
        try:
            info = client.ping(timeout_s=2.0)
        except EngineRequestError as exc:
            # Loading the model can hold the interpreter for a moment: a slow ping means
            # "still loading", not "gone", until the caller's deadline.
            if exc.code != ERR_TIMEOUT or time.monotonic() > deadline:
                raise
            continue
        if info.get("ready"):
            return info
        if info.get("state") == "failed":
            status = client.status()
            raise EngineRequestError(ERR_WARM_UP_FAILED, f"召回引擎加载模型失败：{status.get('error')}")
        if time.monotonic() > deadline:
            raise EngineRequestError(ERR_NOT_READY, "召回引擎在限定时间内没有加载完毕")
        time.sleep(0.1)


@engine_group.command("stop")
def stop_cmd() -> None:
    """让引擎退出（下次需要时会自动重新启动）。"""
    pid = stop_engine(DataPaths.default())
    click.echo(NOT_RUNNING if pid is None else f"召回引擎已停止（进程 {pid}）")


@engine_group.command("serve")
@click.option(
    "--idle-minutes", type=float, default=None, help="闲置多少分钟后退出（默认取配置 engineIdleMinutes）"
)
def serve_cmd(idle_minutes: float | None) -> None:
    """在前台运行引擎（调试用；平时由 hook 自动在后台启动）。"""
    from memself.warm.serve import serve

    sys.exit(serve(DataPaths.default(), idle_minutes))
