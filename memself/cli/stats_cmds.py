"""``memself stats``: what the injected memories earned (``memself.kept.stats``)."""

from __future__ import annotations

import click

from memself.cli.app import echo_json, main
from memself.kept.stats import load_stats
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from memself.text.messages import stats_lines


@main.command("stats")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="输出 JSON：turns、groups（每组每轮条数、用上比例、违反次数）、workspaces（每个范围）、"
    "shownMost、usedLeast、brokenMost",
)
def stats_cmd(as_json: bool) -> None:
    """每轮注入多少记忆、注入的项目事实用上了多少、规则被违反几次，按组和按范围。"""
    paths = DataPaths.default()
    stats = load_stats(paths, MemoryStore(paths).all() if paths.root.is_dir() else [])
    if as_json:
        echo_json(stats)
        return
    for line in stats_lines(stats):
        click.echo(line)
