"""``memself model prepare|status``: prepare the embedding model once, and show whether it is."""

from __future__ import annotations

import click

from memself.cli.app import echo_json, main, now_utc
from memself.config import load_config
from memself.paths import DataPaths


@main.group("model")
def model_group() -> None:
    """向量模型：准备（一次）和查看状态。"""


def _configured(model: str | None) -> str:
    return model or load_config(DataPaths.default()).model


@model_group.command("prepare")
@click.argument("model", required=False)
@click.option("--force", is_flag=True, help="已准备好也重新准备")
def prepare_cmd(model: str | None, force: bool) -> None:
    """下载或读取模型，构建运行时需要的文件并比对校验（默认为当前配置的模型）。"""
    configured = _configured(None)
    name = model or configured
    if force and name == configured:
        # The engine keeps its model's files open, and Windows replaces no folder that holds an
        # open file; the next prompt starts it again on the new preparation.
        from memself.engine.client import stop_engine_quietly

        pid = stop_engine_quietly(DataPaths.default())
        if pid is not None:
            click.echo(f"已停止召回引擎（进程 {pid}），下次提问时会自动重新启动", err=True)
    prepare_with_progress(name, force=force)


def prepare_with_progress(model: str, *, force: bool = False) -> None:
    """Prepare in this process, with a progress bar on a terminal; messages on stderr."""
    from memself.model.prepare import STEPS, prepare
    from memself.progress import progress_bar

    with progress_bar("准备向量模型", STEPS) as advance:
        found = prepare(
            model,
            force=force,
            progress=advance,
            now=now_utc(),
            echo=lambda message: click.echo(message, err=True),
        )
    if found.fresh:
        click.echo(found.done_message(model), err=True)


@model_group.command("status")
@click.argument("model", required=False)
@click.option("--json", "as_json", is_flag=True, help="输出 JSON")
def status_cmd(model: str | None, as_json: bool) -> None:
    """向量模型是否已准备好、在哪里、多大。"""
    from memself.model.cache import status
    from memself.model.catalog import resolve_model

    name = _configured(model)
    info = status(name, resolve_model(name))
    if as_json:
        echo_json(info)
        return
    for line in render_status(info):
        click.echo(line)


def render_status(info: dict) -> list[str]:
    if not info["prepared"]:
        return [
            f"向量模型 {info['model']}：未准备（{info['reason']}）",
            f"  位置    {info['folder']}",
            "  运行 memself model prepare 准备（首次使用时也会自动准备）",
        ]
    cosine = info.get("min_cosine")
    reference = "sentence-transformers" if info.get("exporter", "torch") == "torch" else "numpy 参考实现"
    checked = f"与 {reference} 比对通过，最小余弦 {cosine:.7f}" if cosine is not None else ""
    return [
        f"向量模型 {info['model']}：已准备（{checked}）",
        f"  位置    {info['folder']}",
        f"  大小    {info['size_bytes'] / 1e6:.0f} MB",
        f"  版本    {info['revision']}，准备于 {info['prepared_at']}",
        f"  运行时  onnxruntime；输入 {info['input']}，分词器 {info['tokenizer']}，"
        f"池化 {info['pooling']}，最长 {info['max_tokens']} 个词元，维度 {info['dim']}",
    ]
