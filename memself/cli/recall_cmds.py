"""Recall commands: preview a prompt's recall, run labelled cases, rebuild the index or background."""

from __future__ import annotations

from pathlib import Path

import click

from memself.cli.app import echo_json, main, now_utc
from memself.cli.scope import workspace_option
from memself.config import load_config
from memself.errors import InvalidInput, MemselfError
from memself.paths import DataPaths
from memself.workspace_args import current_workspace, directory_workspace


@main.command("recall")
@click.argument("text")
@click.option("--json", "as_json", is_flag=True, help="输出 JSON")
@workspace_option(
    "按在这个项目目录里开的会话预览：召回所有项目的记忆和这个项目的记忆；默认为当前目录所在的项目"
)
def recall_cmd(text: str, as_json: bool, workspace_dir: str | None) -> None:
    """预览一句输入会召回哪些记忆、分数和每组要过的线（不加分，不写文件）。"""
    from memself.cli.recall_run import preview_recall, render_recall_json, render_recall_text
    from memself.store.memory_store import MemoryStore
    from memself.text.messages import workspace_label

    paths = DataPaths.default()
    if workspace_dir is None:
        workspace = current_workspace()
    else:
        workspace = directory_workspace(workspace_dir, {m.workspace for m in MemoryStore(paths).all()})
    result = preview_recall(
        text,
        paths,
        load_config(paths),
        workspace.key if workspace else "",
        warn=lambda line: click.echo(line, err=True),
    )
    if as_json:
        echo_json(render_recall_json(result))
        return
    if workspace is None:
        click.echo("范围：不在任何项目里的会话（只召回所有项目的记忆）")
    else:
        here = workspace_label(workspace.key, workspace.name)
        click.echo(f"范围：在 {here}里开的会话（所有项目的记忆加上这个项目的）")
    click.echo(render_recall_text(result, workspace.key if workspace else ""))


@main.command("verify")
@click.option(
    "--cases",
    "cases",
    multiple=True,
    type=click.Path(path_type=Path),
    help="用例文件（dev-cases.json 格式或原插件的 verify-cases.json 格式）或存放用例文件的目录；"
    "可给多次，多组时另算留一组校准",
)
@click.option(
    "--applies-when",
    "applies_when",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="适用场景目录：<用例文件名>.json 写 {记忆 key: [请求...]}，按记忆的 appliesWhen 计入评测",
)
@click.option("--json", "as_json", is_flag=True, help="输出 JSON")
def verify_cmd(cases: tuple[Path, ...], applies_when: Path | None, as_json: bool) -> None:
    """用标注用例评测召回：命中、泄漏、单条记忆召回和逐组阈值扫描；多组用例时另算留一组校准。"""
    from memself.cli.recall_run import verify_command
    from memself.verify.run import render_json, render_text
    from memself.verify.sets import SetsResult, render_sets_json, render_sets_text

    paths = DataPaths.default()
    result = verify_command(list(cases), paths, load_config(paths), now_utc(), applies_when=applies_when)
    if isinstance(result, SetsResult):
        if as_json:
            echo_json(render_sets_json(result))
        else:
            click.echo(render_sets_text(result))
    elif as_json:
        echo_json(render_json(result))
    else:
        click.echo(render_text(result))


@main.command("rebuild-index")
def rebuild_index_cmd() -> None:
    """备份旧索引后按当前模型重建全部向量（换模型或手改过记忆正文后用）。"""
    from memself.index.sync import VectorIndex
    from memself.model.encoder import batch_threads, load_encoder
    from memself.progress import progress_bar
    from memself.recall.memory_side import memory_side
    from memself.store.memory_store import MemoryStore

    paths = DataPaths.default()
    memories = MemoryStore(paths).all()
    if not memories:
        raise InvalidInput("记忆库为空，没有可重建的向量")
    encoder = memory_side(load_encoder(load_config(paths).model, threads=batch_threads()))
    with progress_bar("重建向量", len(memories)) as advance:
        result = VectorIndex.for_paths(paths).rebuild(
            memories, encoder, now_utc(), progress=lambda n: advance(n, "")
        )
    click.echo(f"已重建 {result.encoded} 条向量，模型 {encoder.model_id}，维度 {encoder.dim}")
    if result.backup:
        click.echo(f"旧索引备份在 {result.backup}")
    if result.failed:
        raise MemselfError(
            f"有 {len(result.failed)} 条编码失败，记忆仍在，下次同步时重试：{'、'.join(result.failed)}"
        )


@main.command("build-background", hidden=True)
def build_background_cmd() -> None:
    """按当前模型重新生成背景均值和召回空间（换模型或改了背景句子后用）。"""
    from memself.model.encoder import batch_threads, load_encoder
    from memself.recall.background import build_background
    from memself.recall.scoring import load_recaller

    paths = DataPaths.default()
    model = load_config(paths).model
    encoder = load_encoder(model, threads=batch_threads())
    background = build_background(encoder)
    # A calibrated model scores in a space built from the shipped general prompts; it has its own
    # cache, rebuilt here too so both stay in step with the model and the sentence files.
    recaller = load_recaller(encoder, model, rebuild_space=True)
    click.echo(
        f"已生成 {background.model_id} 的背景均值（维度 {background.mean.shape[0]}），"
        f"召回空间去掉了 {len(recaller.space.components)} 个公共方向；"
        "请再运行 memself verify 检查阈值"
    )
