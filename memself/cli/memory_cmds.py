"""Commands that read and change the memory store: list, read, add, move, delete, trash, restore,
config, open."""

from __future__ import annotations

import json
import os
import sys
import webbrowser
from collections.abc import Iterable

import click

from memself import edits as memories
from memself.cli.app import echo_json, main, now_utc
from memself.cli.scope import (
    WORKSPACE_HELP,
    global_option,
    memory_json,
    scope_json,
    target_scope,
    workspace_option,
)
from memself.config import KEYS, load_config, set_config_value, set_model
from memself.errors import InvalidInput, MemselfError, NotFound
from memself.judge.credentials import key_state, read_key_file, shown_base
from memself.page import listing
from memself.paths import DataPaths
from memself.platform import files as platform_files
from memself.recall.lines import line_in_effect, line_set_message
from memself.store.memory_store import BadLine, MemoryStore
from memself.store.records import (
    GROUP_LABELS,
    GROUP_SHORT_LABELS,
    GROUPS,
    MAX_APPLIES_WHEN,
    MAX_APPLIES_WHEN_TEXT,
    Memory,
    fmt_confidence,
    one_line,
)
from memself.store.workspaces import Workspace
from memself.text.messages import (
    APPLIES_WHEN_LABEL,
    ORIGIN_LABEL,
    SCOPE_LABEL,
    gain_text,
    origin_line,
    origin_text,
    scope_text,
    workspace_label,
)
from memself.workspace_args import current_workspace, directory_workspace


def _store() -> MemoryStore:
    return MemoryStore(DataPaths.default())


_VIEW_HELP = "只看在这个项目目录里开的会话能看到的记忆：所有项目的，加上这个项目的"
_JSON_SCOPE_HELP = "；每条带 workspace 和 workspaceName（所有项目的记忆为 null）"


def _view(workspace_dir: str | None, memories: Iterable[Memory]) -> Workspace | None:
    """The workspace whose view ``--workspace`` asks for (None: everything)."""
    if workspace_dir is None:
        return None
    return directory_workspace(workspace_dir, known={m.workspace for m in memories})


def _team(view: Workspace | None, groups: Iterable[str] = GROUPS) -> list[Memory]:
    """The memories the repository of ``view`` (default: the working directory's) carries in
    ``.memself/``, read-only; [] outside a repository."""
    from memself.store.team import team_memories

    here = view if view is not None else current_workspace()
    return [] if here is None else [m for g in groups for m in team_memories(here.key, g)]


def _team_heading(carried: list[Memory]) -> str:
    from memself.store.team import TEAM_DIR

    counts = "，".join(f"{g} {sum(1 for m in carried if m.category == g)} 条" for g in GROUPS)
    return f"本仓库 {os.path.join(carried[0].workspace, TEAM_DIR)} 携带的团队记忆（只读）：{counts}"


_LIST_SHOWN = 30


@main.command("list")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="输出 JSON；workspaces 为每个范围的条数，其中 workspace 和 workspaceName 对所有项目为 null；"
    "view 为 --workspace 给出的项目（没给时为 null）；memories 为按置信度排的一页（--offset、--limit），"
    "nextOffset 为下一页的 --offset（没有下一页时为 null）；和 --all 一起用时每行一条记忆（JSON Lines）",
)
@click.option("--all", "show_all", is_flag=True, help="逐条列出全部记忆（按文件中的顺序，边读边输出）")
@click.option(
    "--limit", type=click.IntRange(0, 10_000), default=None, help="列出多少条（默认 30，JSON 为 50）"
)
@click.option("--offset", type=click.IntRange(0), default=0, help="从按置信度排序的第几条开始（从 0 起）")
@workspace_option(_VIEW_HELP)
def list_cmd(
    as_json: bool, show_all: bool, limit: int | None, offset: int, workspace_dir: str | None
) -> None:
    """各组、各范围的记忆条数，加上置信度最高的几十条；--all 列出全部。"""
    store = _store()
    summaries = listing.load(store)
    view = None
    if workspace_dir is not None:
        view = directory_workspace(workspace_dir, known=listing.known_workspaces(summaries))
    view_key = None if view is None else view.key
    carried = _team(view)
    if show_all:
        _list_all(store, view_key, as_json)
        for memory in carried:
            click.echo(json.dumps(memory_json(memory), ensure_ascii=False) if as_json else _list_line(memory))
        return
    problems = [
        {"file": name, "line": line, "reason": why}
        for name, line, why in listing.problems(summaries, store.paths.trash.name)
    ]
    scopes = listing.scope_counts(summaries, view_key)
    counts = {g: sum(by_group[g] for _, _, by_group in scopes) for g in GROUPS}
    total = sum(counts.values())
    shown_n = limit if limit is not None else (50 if as_json else _LIST_SHOWN)
    shown = listing.page(store, summaries, view_key, offset, shown_n)
    next_offset = offset + len(shown) if offset + len(shown) < total and shown_n else None
    if as_json:
        echo_json(
            {
                **counts,
                "total": total,
                "view": None if view is None else {"workspace": view.key, "workspaceName": view.name},
                "workspaces": [
                    {"workspace": key or None, "workspaceName": name or None, **by_group}
                    for key, name, by_group in scopes
                ],
                "problems": problems,
                "offset": offset,
                "limit": shown_n,
                "nextOffset": next_offset,
                "memories": [memory_json(m) for m in shown],
                "team": [memory_json(m) for m in carried],
            }
        )
        return
    if view is not None:
        here = workspace_label(view.key, view.name)
        click.echo(f"在 {here}里开的会话能看到的记忆（所有项目的，加上这个项目的）：")
    click.echo(f"rule    {counts['rule']} 条（会话开始全量注入，无条件生效）")
    click.echo(f"project {counts['project']} 条（按相关性自动召回）")
    click.echo(f"共 {total} 条")
    click.echo("按范围：")
    for key, name, by_group in scopes:
        click.echo(f"  {scope_text(key, name)}：rule {by_group['rule']} 条，project {by_group['project']} 条")
    if shown:
        where = f"第 {offset + 1} 到 {offset + len(shown)} 条" if offset else f"置信度最高的 {len(shown)} 条"
        rest = "；下一页：--offset " + str(next_offset) if next_offset is not None else ""
        click.echo(f"{where}（全部：memself list --all；网页：memself open{rest}）：")
        for memory in shown:
            click.echo(f"  {_list_line(memory)}")
    if carried:
        click.echo(_team_heading(carried))
        for memory in carried:
            click.echo(f"  {_list_line(memory)}")
    for problem in problems:
        click.echo(
            f"注意：{problem['file']} 第 {problem['line']} 行无法读取（{problem['reason']}），"
            "已隔离：这一行原样保留在文件里，其余记忆照常使用；修好或删掉这一行即可",
            err=True,
        )
    if any(p["file"] != store.paths.trash.name for p in problems):
        click.echo("每日衰减在这些行修好之前暂停（不会改动有问题的文件）", err=True)


def _file_name(store: MemoryStore, summary_name: str) -> str:
    return store.paths.trash.name if summary_name == listing.TRASH else f"{summary_name}.jsonl"


def _list_line(memory: Memory) -> str:
    from memself.kept.counts import advice

    mark = "[已废弃] " if not memory.active else ""
    note = f"{advice(memory)}，" if advice(memory) else ""
    return (
        f"[{memory.category}] {mark}{one_line(memory.text)}（置信度 {fmt_confidence(memory.confidence)}，"
        f"{scope_text(memory.workspace, memory.workspaceName)}，{note}{ORIGIN_LABEL}{origin_text(memory)}，"
        f"id {memory.id}）"
    )


def _list_all(store: MemoryStore, view: str | None, as_json: bool) -> None:
    """Every memory, line by line as the files hold them: nothing is collected first."""
    try:
        for group in GROUPS:
            for item in listing.stream(store.paths, group):
                if isinstance(item, BadLine):
                    where = f"{group}.jsonl 第 {item.line_no} 行"
                    click.echo(f"注意：{where}无法读取（{item.reason}），已跳过", err=True)
                elif view is None or item.visible_in(view):
                    line = json.dumps(memory_json(item), ensure_ascii=False) if as_json else _list_line(item)
                    click.echo(line)
    except BrokenPipeError:
        # The reader stopped early (`| head`): that is an answer, not an error. Python would
        # still flush into the closed pipe at exit, so stdout goes to /dev/null first.
        os.dup2(os.open(os.devnull, os.O_WRONLY | platform_files.BINARY), sys.stdout.fileno())


@main.command("read")
@click.argument("group", type=click.Choice(GROUPS))
@click.option("--json", "as_json", is_flag=True, help="输出 JSON（全部字段" + _JSON_SCOPE_HELP + "）")
@workspace_option(_VIEW_HELP)
def read_cmd(group: str, as_json: bool, workspace_dir: str | None) -> None:
    """看某一组的全部记忆（按置信度），每条注明范围。"""
    memories = _store().read_group(group)
    view = _view(workspace_dir, memories)
    if view is not None:
        memories = [m for m in memories if m.visible_in(view.key)]
    carried = _team(view, [group])
    if as_json:
        echo_json([memory_json(m) for m in [*memories, *carried]])
        return
    where = "" if view is None else f"在 {workspace_label(view.key, view.name)}里开的会话能看到的"
    if not memories:
        click.echo(f"「{group}」下没有{where}{'本机' if carried else ''}记忆")
    else:
        click.echo(f"{group}（共 {len(memories)} 条{'，' + where if where else ''}）")
    _read_lines(memories)
    if carried:
        click.echo(_team_heading(carried))
        _read_lines(carried)


def _read_lines(memories: list[Memory]) -> None:
    for number, memory in enumerate(memories, start=1):
        mark = "[已废弃] " if not memory.active else ""
        click.echo(
            f"{number}. {mark}{one_line(memory.text)}（置信度 {fmt_confidence(memory.confidence)}，"
            f"id {memory.id}）"
        )
        if memory.appliesWhen:
            click.echo(f"   {_when_line(memory.appliesWhen)}")
        click.echo(f"   {_scope_line(memory)}")
        click.echo(f"   {origin_line(memory)}")


def _scope_line(memory: Memory) -> str:
    return SCOPE_LABEL + scope_text(memory.workspace, memory.workspaceName)


def _when_line(requests: tuple[str, ...]) -> str:
    # A terminal shows them as stored (one clean line each), like the memory's text.
    return APPLIES_WHEN_LABEL + "；".join(requests)


_WHEN_HELP = (
    f"适用场景：以后会用到这条记忆的一句日常请求，可重复，最多 {MAX_APPLIES_WHEN} 条，"
    f"每条 2 到 {MAX_APPLIES_WHEN_TEXT} 个字"
)


def _checked_when(whens: tuple[str, ...]) -> list[str]:
    """The requests exactly as typed (one line each); refused rather than silently shortened."""
    lines = list(dict.fromkeys(one_line(w) for w in whens))
    if any(not 2 <= len(line) <= MAX_APPLIES_WHEN_TEXT for line in lines):
        raise InvalidInput(f"--when 每条需要 2 到 {MAX_APPLIES_WHEN_TEXT} 个字")
    if len(lines) > MAX_APPLIES_WHEN:
        raise InvalidInput(f"--when 最多 {MAX_APPLIES_WHEN} 条")
    return lines


def _add(group: str, text: str, whens: tuple[str, ...], workspace: Workspace | None) -> None:
    added = _store().add(
        text,
        group,
        now_utc(),
        evidence="用户通过 CLI 直接添加",
        applies_when=_checked_when(whens),
        workspace=workspace,
    )
    memory = added.memory
    title = GROUP_SHORT_LABELS[group]
    if added.duplicate:
        click.echo(f"已有相同的{title}，没有重复新增，改为强化它：{one_line(memory.text)}")
        click.echo(f"{gain_text(added.gain)}，现为 {fmt_confidence(memory.confidence)}，id {memory.id}")
        click.echo(_scope_line(memory))
        if added.revived:
            click.echo("它原先已废弃，这次强化后恢复为有效。")
        elif memory.deprecated:
            click.echo("它仍是已废弃状态（置信度不高于 0.4），不会注入或召回。")
        return
    click.echo(f"已新增{title}：{one_line(memory.text)}")
    if memory.appliesWhen:
        click.echo(_when_line(memory.appliesWhen))
    click.echo(f"置信度 {fmt_confidence(memory.confidence)}，id {memory.id}")
    click.echo(_scope_line(memory))
    click.echo("下个会话开始起无条件生效。" if group == "rule" else "之后每轮输入按相关性召回。")
    if added.trashed_twin is not None:
        twin = added.trashed_twin
        click.echo(
            f"回收站里有一条相同的{title}（id {twin.memory.id}，删除于 {twin.deleted_at}），没有恢复它；"
            f"不需要时可以不管，30 天后自动清除。"
        )


@main.group("rule", help=f"{GROUP_LABELS['rule']}。")
def rule_group() -> None:
    pass


@rule_group.command("add")
@click.argument("text")
@click.option("--when", "whens", multiple=True, metavar="请求", help=_WHEN_HELP)
@workspace_option("只在这个项目里生效：" + WORKSPACE_HELP)
@global_option("在所有项目里生效（默认）")
def rule_add(text: str, whens: tuple[str, ...], workspace_dir: str | None, to_global: bool) -> None:
    """直接新增一条规则（置信度 0.5），默认在所有项目里生效。"""
    _add("rule", text, whens, target_scope(workspace_dir, to_global, default_here=False))


@main.group("project", help=f"{GROUP_LABELS['project']}。")
def project_group() -> None:
    pass


@project_group.command("add")
@click.argument("text")
@click.option("--when", "whens", multiple=True, metavar="请求", help=_WHEN_HELP)
@workspace_option("只在这个项目里召回：" + WORKSPACE_HELP + "；默认为当前目录所在的项目")
@global_option("在所有项目里召回")
def project_add(text: str, whens: tuple[str, ...], workspace_dir: str | None, to_global: bool) -> None:
    """直接新增一条项目事实（置信度 0.5），默认只属于当前目录所在的项目。"""
    _add("project", text, whens, target_scope(workspace_dir, to_global, default_here=True))


@main.command("move")
@click.argument("mem_id")
@workspace_option("改为只属于这个项目：" + WORKSPACE_HELP)
@global_option("改为所有项目都能用")
def move_cmd(mem_id: str, workspace_dir: str | None, to_global: bool) -> None:
    """改变一条记忆的范围：只属于某个项目（--workspace DIR），或所有项目（--global）。"""
    if workspace_dir is None and not to_global:
        raise InvalidInput("请用 --workspace DIR 或 --global 指定新的范围")
    target = target_scope(workspace_dir, to_global, default_here=False)
    moved = memories.move(_store(), mem_id, target, now_utc())
    memory = moved.memory
    label = scope_text(memory.workspace, memory.workspaceName)
    if not moved.changed:
        click.echo(f"范围没有变化，仍是「{label}」：{one_line(memory.text)}（id {memory.id}）")
        return
    click.echo(
        f"已把 {memory.id} 的范围从「{scope_text(moved.previous)}」改为「{label}」：{one_line(memory.text)}"
    )
    if moved.invalidated:
        click.echo(f"已作废 {moved.invalidated} 条指向这条记忆的待确认提案。")


@main.command("delete")
@click.argument("ids", nargs=-1, required=True)
def delete_cmd(ids: tuple[str, ...]) -> None:
    """把记忆移入回收站（保留 30 天）。"""
    removed = memories.delete(_store(), ids, now_utc()).removed
    click.echo(f"已删除 {len(removed)} 条，移入回收站（保留 30 天，可用 memself restore <id> 恢复）：")
    for memory in removed:
        click.echo(f"- {one_line(memory.text)}（id {memory.id}）")
    missing = [i for i in dict.fromkeys(ids) if i not in {m.id for m in removed}]
    if missing:
        # The others are deleted and stay deleted; the exit code says not everything asked was done.
        raise NotFound(f"没有找到这些记忆，未删除：{'、'.join(missing)}")


@main.command("trash")
@click.option("--json", "as_json", is_flag=True, help="输出 JSON（全部字段）")
def trash_cmd(as_json: bool) -> None:
    """列出回收站。"""
    entries = _store().trash_entries()
    if as_json:
        echo_json([{**e.to_json(), **scope_json(e.memory)} for e in entries])
        return
    if not entries:
        click.echo("回收站是空的")
        return
    click.echo(f"回收站（共 {len(entries)} 条，保留 30 天）")
    for entry in entries:
        click.echo(
            f"- [{entry.memory.category}] {one_line(entry.memory.text)}（id {entry.memory.id}，"
            f"删除于 {entry.deleted_at}）"
        )


@main.command("restore")
@click.argument("ids", nargs=-1, required=True)
def restore_cmd(ids: tuple[str, ...]) -> None:
    """从回收站恢复记忆（可以给多个 id）。"""
    store, now = _store(), now_utc()
    refused = []
    for mem_id in dict.fromkeys(ids):
        try:
            memory = store.restore(mem_id, now)
        except (NotFound, InvalidInput) as exc:
            refused.append(str(exc))
            continue
        click.echo(
            f"已恢复到 {memory.category}：{one_line(memory.text)}（置信度 "
            f"{fmt_confidence(memory.confidence)}，id {memory.id}）"
        )
    # What was restored stays restored; the exit code says not everything asked for was done.
    if refused:
        raise MemselfError("；".join(refused))


# Unknown options pass through as values: a negative number (``recallMinScore -1``) is a value
# for the key's own range check, not an option click does not know.
@main.command("config", context_settings={"ignore_unknown_options": True})
@click.argument("key", required=False)
@click.argument("value", required=False)
@click.option("--json", "as_json", is_flag=True, help="输出 JSON")
def config_cmd(key: str | None, value: str | None, as_json: bool) -> None:
    """查看配置，或修改一项：memself config recallTopK 5。"""
    paths = DataPaths.default()
    if key == "model" and value is not None:
        # Prepared here, with a progress bar, rather than at the next prompt in the engine where
        # nobody sees it; and written only once it worked (an engine never meets a model it
        # cannot load because of this command).
        from memself.cli.model_cmds import prepare_with_progress

        click.echo(f"model 已设为 {set_model(paths, value, prepare_with_progress)}")
        return
    if key is not None and value is not None:
        stored = set_config_value(paths, key, value)
        click.echo(line_set_message(paths, key) or f"{key} 已设为 {_show(stored)}")
        if key == "sideApiBase":
            _warn_key_binding(paths, str(stored))
        return
    config = load_config(paths)
    names = [key] if key else list(KEYS)
    if key is not None and key not in KEYS:
        set_config_value(paths, key, "")  # raises the "unknown key" message
    shown = {n: config.values[n] for n in names}
    marks = {n: "" if config.is_set(n) else "  (默认)" for n in names}
    for name in names:
        effective = line_in_effect(config, name)
        if effective is not None:
            shown[name], note = effective
            marks[name] = f"  ({note})"
    if as_json:
        echo_json(shown)
        return
    for name in names:
        click.echo(f"{name.ljust(21)} = {_show(shown[name])}{marks[name]}")


def _warn_key_binding(paths: DataPaths, base: str) -> None:
    """A key entered for another endpoint is not sent to this one until the user re-enters it."""
    found = read_key_file(paths)
    state = key_state(found, base)
    if state == "mismatch":
        click.echo(
            f"注意：apiKey 是为 {shown_base(found.bound_base)} 录入的，不会发往新地址，记忆沉淀暂停；"
            "确认新地址可信后运行 memself key set 重新输入 apiKey。"
        )
    elif state == "unbound":
        click.echo(
            "注意：apiKey 是原插件格式，确认地址之前不会发往任何地方，记忆沉淀暂停；"
            "在终端运行 memself doctor 核对地址后确认，或运行 memself key set 重新输入 apiKey。"
        )


def _show(value: object) -> str:
    if value is None:
        return "（按模型默认）"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@main.command("open")
@click.option("--no-browser", is_flag=True, help="只生成，不打开浏览器")
def open_cmd(no_browser: bool) -> None:
    """生成 memories.html 并用默认浏览器打开。"""
    path = listing.refresh_views(DataPaths.default(), now_utc())
    click.echo(f"已生成 {path}")
    if not no_browser and not webbrowser.open(path.as_uri()):
        click.echo("没有找到可用的浏览器，请手动打开上面的文件")
