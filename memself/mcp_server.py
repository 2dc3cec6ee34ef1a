"""The MCP server ``memory-self-evolution``: exactly five tools over stdio (official ``mcp`` SDK).

The tool logic lives in ``MemoryTools`` (plain synchronous methods, tested directly); the SDK's
low-level ``Server`` only lists the tools and routes calls, so the schemas and every Chinese
message are exactly ours. Memory texts in tool results are quoted through ``texts.inert`` (a
tool result is model context too). Config is re-read on every call (unlike the original, which read it
once at start-up and could write stale values back). No tool ever returns the API key or the
session secret, and nothing but ``memory_resolve`` can add a memory, and only one the user
picked in the plugin's popup.
"""

from __future__ import annotations

import os
import webbrowser
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import Any

from memself import __version__
from memself import edits as memories
from memself.config import (
    KEYS,
    USER_ONLY_KEYS,
    load_config,
    set_config_value,
    user_only_command,
    user_only_key,
)
from memself.errors import InvalidInput, MemselfError
from memself.judge.credentials import key_state, read_key_file
from memself.judge.resolve import DECISIONS, MSG_INVALID, resolve
from memself.logs import log
from memself.paths import DataPaths
from memself.recall.lines import line_in_effect, line_set_message
from memself.store.memory_store import MemoryStore
from memself.store.records import GROUP_LABELS, GROUPS, Memory, fmt_confidence
from memself.store.workspaces import Workspace
from memself.text.messages import (
    RESOLVE_TOOL,
    SCOPE_LABEL,
    group_suffix,
    inert,
    origin_line,
    requests_line,
    scope_text,
    workspace_label,
)
from memself.workspace_args import current_workspace, directory_workspace

SERVER_NAME = "memory-self-evolution"
READ_LIMIT = 50
UPDATE_ACTIONS = ("delete", "merge", "replace", "move")
SCOPES = ("global", "workspace")

TOOLS: list[dict[str, Any]] = [
    {
        "name": "memory_list",
        "description": "列出 memory-self-evolution 插件两组记忆"
        f"（rule {GROUP_LABELS['rule']}、project {GROUP_LABELS['project']}）各有多少条，"
        "以及按范围（所有项目、各个项目）各有多少条，并注明当前项目。"
        "open=true 时刷新 memories.html 并用系统默认浏览器打开，供用户查看全部记忆。",
        "inputSchema": {
            "type": "object",
            "properties": {"open": {"type": "boolean", "description": "为 true 时刷新并打开 memories.html"}},
        },
    },
    {
        "name": "memory_read",
        "description": "按置信度从高到低读取某一组记忆的前 50 条（已废弃的也列出并标注），每条带 id 和范围"
        "（所有项目，或只属于某个项目）。默认只列出当前项目能用到的：所有项目的记忆和当前项目的记忆。"
        "整理记忆（删除、合并、改写、改范围）前先用它找到 id。只读，不加分。",
        "inputSchema": {
            "type": "object",
            "required": ["group"],
            "properties": {
                "group": {
                    "type": "string",
                    "enum": list(GROUPS),
                    "description": f"rule（{GROUP_LABELS['rule']}）或 project（{GROUP_LABELS['project']}）",
                },
                "all_workspaces": {
                    "type": "boolean",
                    "description": "为 true 时也列出其他项目的记忆",
                },
            },
        },
    },
    {
        "name": "memory_update",
        "description": "只在用户明确要求整理记忆、并已用提问工具确认后使用："
        "删除、合并、改写本插件已有的记忆，或改变它的范围。"
        "delete：id（一条）或 ids（多条），移入回收站；"
        "merge：保留 id，正文改为 text，id2 移入回收站，"
        "置信度取两条中较高的，范围沿用 id 的；replace：把 id 的正文改为 text，置信度不变；"
        "move：把 id 的范围改为 scope：global（所有项目都能用）或 workspace"
        "（只在一个项目里注入和召回：workspace 给出的项目目录，省略时为当前项目），正文和置信度不变。"
        "text 为 6 到 400 个字，"
        "由用户给出或经用户确认。不能新增记忆。",
        "inputSchema": {
            "type": "object",
            "required": ["action"],
            "properties": {
                "action": {"type": "string", "enum": list(UPDATE_ACTIONS)},
                "id": {"type": "string", "description": "要删除、保留或改写的记忆 id"},
                "ids": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "delete 多条时的 id 列表",
                },
                "id2": {"type": "string", "description": "merge 时被并掉、移入回收站的记忆 id"},
                "text": {"type": "string", "description": "merge 或 replace 后的完整正文"},
                "scope": {
                    "type": "string",
                    "enum": list(SCOPES),
                    "description": "move 的新范围：global 所有项目，workspace 只属于一个项目",
                },
                "workspace": {
                    "type": "string",
                    "description": "scope 为 workspace 时的项目目录（绝对路径）；省略时为当前项目",
                },
            },
        },
    },
    {
        "name": RESOLVE_TOOL,
        "description": "只在收到含 MEMORY_CONFIRM_V1 的插件指令、"
        "并且用户在「记忆确认·插件」弹窗里明确点选后调用，"
        "每条提案调用一次。sessionID 取指令里该条的 sessionID，decision 取所选选项对应的值。"
        "正文和目标记忆由插件从提案中读取，不能由调用方提供。用户跳过或关闭弹窗时不要调用。",
        "inputSchema": {
            "type": "object",
            "required": ["sessionID", "decision"],
            "properties": {
                "sessionID": {"type": "string", "description": "指令中该条提案的 sessionID（s_ 开头）"},
                "decision": {"type": "string", "enum": list(DECISIONS)},
            },
        },
    },
    {
        "name": "memory_config",
        "description": "查看或修改 memory-self-evolution 的配置。不带参数时列出全部配置；"
        "同时给出 key 与 value 时修改这一项。接口密钥不经此工具查看或修改；"
        f"{'、'.join(USER_ONLY_KEYS)} 只能由用户在终端用 memself config 修改。",
        "inputSchema": {
            "type": "object",
            "properties": {
                "key": {"type": "string", "description": "配置项名，例如 confirm、recallTopK"},
                "value": {"type": ["string", "number", "boolean"], "description": "新的值"},
            },
        },
    },
]
TOOL_NAMES = tuple(t["name"] for t in TOOLS)
_KEY_STATES = {
    "missing": "未设置",
    "unbound": (
        "已设置（原插件格式），但还没有确认可以发往哪个地址，记忆沉淀已暂停"
        "（请用户在终端运行 memself doctor 确认）"
    ),
    "ok": "已设置",
    "invalid": "文件无法读取或内容无效（请用户运行 memself key set）",
    "mismatch": "已设置，但不是为当前 sideApiBase 录入的，记忆沉淀已暂停（请用户运行 memself key set）",
}
_SECRET_KEYS = {"apikey", "api_key", "sessionsecret", "session-secret", "secret"}


class MemoryTools:
    """The five tools as plain methods. ``host`` scopes ``memory_resolve`` to one host.
    ``workspace`` is the current project (the workspace of the server's working directory, where
    hosts start it); None: no project, and then every memory is listed."""

    def __init__(
        self,
        paths: DataPaths,
        host: str,
        now_fn: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
        opener: Callable[[str], object] = webbrowser.open,
        workspace: Workspace | None = None,
    ) -> None:
        self.paths = paths
        self.host = host
        self.now_fn = now_fn
        self.opener = opener
        self.workspace = workspace

    def call(self, name: str, arguments: dict[str, Any] | None) -> str:
        args = arguments if isinstance(arguments, dict) else {}
        if name not in TOOL_NAMES:
            raise InvalidInput(f"未知工具「{name}」")
        return getattr(self, name)(args)

    @property
    def store(self) -> MemoryStore:
        return MemoryStore(self.paths)

    # -- memory_list ------------------------------------------------------------------------
    def memory_list(self, args: dict[str, Any]) -> str:
        from memself.page import listing  # counts from the cached per-file summaries

        store = self.store
        summaries = listing.load(store)
        scopes = listing.scope_counts(summaries, None)
        counts = {g: sum(by_group[g] for _, _, by_group in scopes) for g in GROUPS}
        dead = listing.deprecated_counts(summaries)
        lines: list[str] = []
        if not any(counts.values()):
            lines.append("记忆库为空")
        else:
            hints = {
                "rule": f"{GROUP_LABELS['rule']}，会话开始全量注入，每轮也按相关性召回",
                "project": f"{GROUP_LABELS['project']}，每轮按相关性召回",
            }
            for group in GROUPS:
                extra = f"（其中已废弃 {dead[group]} 条）" if dead[group] else ""
                lines.append(f"{group:<7} {counts[group]} 条{extra} —— {hints[group]}")
            lines += self._scope_lines(scopes)
        carried = self._team()
        if carried:
            by_group = "，".join(f"{g} {sum(1 for m in carried if m.category == g)} 条" for g in GROUPS)
            lines.append(f"当前项目的仓库 .memself/ 携带团队记忆（只读）：{by_group}")
        bad = listing.problems(summaries, store.paths.trash.name)
        if bad:
            where = "、".join(f"{name} 第 {line} 行" for name, line, _ in bad[:5])
            lines.append(
                f"注意：{where}{'等' if len(bad) > 5 else ''}无法读取，已隔离（原样保留，其余记忆"
                "照常使用）；请用户运行 memself list 查看原因并修好这些行"
            )
        if args.get("open") in (True, "true"):  # some clients send booleans as strings
            from memself.page.listing import refresh_views  # the page and the list summaries, one read

            refresh_views(self.paths, self.now_fn())
            self.opener(self.paths.html.resolve().as_uri())
            lines.append(f"已刷新并打开 {self.paths.html}")
        return "\n".join(lines)

    def _scope_lines(self, scopes: list[tuple[str, str, dict[str, int]]]) -> list[str]:
        """Counts per scope (global first, then each workspace by name), the current one marked."""
        here = self.workspace.key if self.workspace else None
        lines = ["按范围："]
        for key, name, counts in scopes:
            mark = "（当前项目）" if key and key == here else ""
            by_group = "，".join(f"{g} {counts[g]} 条" for g in GROUPS)
            lines.append(f"- {inert(scope_text(key, name))}{mark}：{by_group}")
        lines.append(self._here_line())
        return lines

    def _here_line(self) -> str:
        if self.workspace is None:
            return "当前不在任何项目里：只有所有项目的记忆会注入和召回。"
        here = inert(workspace_label(self.workspace.key, self.workspace.name))
        return f"当前项目：{here}；其他项目的记忆不会在这里注入或召回。"

    # -- memory_read ------------------------------------------------------------------------
    def memory_read(self, args: dict[str, Any]) -> str:
        group = args.get("group")
        if group not in GROUPS:
            raise InvalidInput("参数 group 必须是 rule 或 project")
        memories = self.store.read_group(group)
        everything = self.workspace is None or args.get("all_workspaces") in (True, "true")
        if not everything and self.workspace is not None:
            memories = [m for m in memories if m.visible_in(self.workspace.key)]
        where = "" if everything else "所有项目的和当前项目的，"
        carried = self._team([group])
        if not memories and not carried:
            return f"「{group}」下没有{where.rstrip('，')}记忆"
        more = f"，以下为前 {READ_LIMIT} 条" if len(memories) > READ_LIMIT else ""
        lines = [f"{group}（{where}共 {len(memories)} 条{more}）"]
        lines += _read_lines(memories[:READ_LIMIT])
        if carried:
            lines.append(f"当前项目的仓库 .memself/ 携带的团队记忆（只读，共 {len(carried)} 条）：")
            lines += _read_lines(carried[:READ_LIMIT])
        lines.append(self._here_line())
        return "\n".join(lines)

    def _team(self, groups: Sequence[str] = GROUPS) -> list[Memory]:
        """The current project's repository's ``.memself/`` memories (none without a project)."""
        from memself.store.team import team_memories

        if self.workspace is None:
            return []
        return [m for g in groups for m in team_memories(self.workspace.key, g)]

    # -- memory_update ----------------------------------------------------------------------
    def memory_update(self, args: dict[str, Any]) -> str:
        action = args.get("action")
        now = self.now_fn()
        store = self.store
        if action == "delete":
            ids = _id_list(args)
            if not ids:
                raise InvalidInput("delete 需要 id 或 ids")
            deleted = memories.delete(store, ids, now)
            removed = deleted.removed
            gone = {m.id for m in removed}
            lines = [f"已删除 {len(removed)} 条记忆，已移入回收站（可用 memself restore <id> 恢复）："]
            lines += [f"- {inert(m.text)}（id {m.id}）" for m in removed]
            skipped = [i for i in ids if i not in gone]
            if skipped:
                lines.append("以下 id 不存在，已跳过：" + "、".join(skipped))
            return "\n".join(lines + _invalidated(deleted.invalidated))
        if action == "merge":
            keep, drop, text = _str_arg(args, "id"), _str_arg(args, "id2"), _str_arg(args, "text")
            if not keep or not drop or not text:
                raise InvalidInput("merge 需要 id、id2 和 text")
            dropped = store.get(drop)
            merged = memories.merge(store, keep, drop, text, now)
            m = merged.change.memory
            lines = [
                f"已合并：保留 {m.id}，正文改为「{inert(m.text)}」，"
                f"置信度 {fmt_confidence(m.confidence)}；{drop} 已移入回收站。{group_suffix(m.category)}"
            ]
            if dropped is not None and dropped.workspace != m.workspace:
                # The dropped memory's facts now live in the kept one's scope: say so, once.
                lines.append(
                    f"注意：{drop} 的范围是「{_scope(dropped)}」，"
                    f"合并后的记忆沿用 {m.id} 的范围「{_scope(m)}」；"
                    "需要时可用 move 改范围。"
                )
            return "\n".join(lines + _invalidated(merged.invalidated))
        if action == "replace":
            mem_id, text = _str_arg(args, "id"), _str_arg(args, "text")
            if not mem_id or not text:
                raise InvalidInput("replace 需要 id 和 text")
            replaced = memories.replace(store, mem_id, text, now)
            m, previous = replaced.change.memory, replaced.change.previous_text
            lines = [
                f"已改写 {m.id}：「{inert(previous)}」改为「{inert(m.text)}」，置信度不变"
                f"（{fmt_confidence(m.confidence)}）。{group_suffix(m.category)}"
            ]
            return "\n".join(lines + _invalidated(replaced.invalidated))
        if action == "move":
            return self._move(args, now)
        raise InvalidInput("参数 action 必须是 delete、merge、replace 或 move")

    def _move(self, args: dict[str, Any], now: datetime) -> str:
        mem_id, scope = _str_arg(args, "id"), _str_arg(args, "scope")
        if not mem_id or scope not in SCOPES:
            raise InvalidInput("move 需要 id 和 scope（global 或 workspace）")
        directory = _str_arg(args, "workspace")
        target: Workspace | None = None
        if scope == "global":
            if directory:
                raise InvalidInput("scope 为 global 时不能给出 workspace")
        elif directory:
            # A relative path would be read against the server's directory, not the user's intent.
            if not os.path.isabs(os.path.expanduser(directory)):
                raise InvalidInput("workspace 需要项目目录的绝对路径")
            target = directory_workspace(directory)
        elif self.workspace is None:
            raise InvalidInput("当前不在任何项目里：请在 workspace 里给出项目目录的绝对路径")
        else:
            target = self.workspace
        moved = memories.move(self.store, mem_id, target, now)
        m = moved.memory
        label = _scope(m)
        if not moved.changed:
            return f"{m.id} 的范围本来就是「{label}」，没有改动：「{inert(m.text)}」"
        lines = [
            f"已把 {m.id} 的范围从「{inert(scope_text(moved.previous))}」改为「{label}」，"
            f"正文和置信度不变：「{inert(m.text)}」"
        ]
        return "\n".join(lines + _invalidated(moved.invalidated))

    # -- memory_resolve ---------------------------------------------------------------------
    def memory_resolve(self, args: dict[str, Any]) -> str:
        session_id, decision = args.get("sessionID"), args.get("decision")
        if not isinstance(session_id, str) or not isinstance(decision, str):
            raise InvalidInput(MSG_INVALID)
        return resolve(self.paths, self.store, self.host, session_id.strip(), decision.strip(), self.now_fn())

    # -- memory_config ----------------------------------------------------------------------
    def memory_config(self, args: dict[str, Any]) -> str:
        key = args.get("key")
        value = args.get("value")
        if key is None or key == "":
            return self._show_config()
        if not isinstance(key, str):
            raise InvalidInput("key 必须是字符串")
        if key.strip().lower().replace("_", "") in _SECRET_KEYS:
            raise InvalidInput("接口密钥不能通过 memory_config 查看或修改，请在终端运行 memself setup")
        if key == "sideJudge":
            raise InvalidInput(
                "sideJudge 是旧版阻塞模式的开关，不能在这里修改；请在终端运行 memself setup sidepath"
            )
        protected = user_only_key(key)
        if protected is not None:
            log(self.paths, "mcp-config-refused", key=protected, agent=self.host)
            raise InvalidInput(
                f"{protected} 决定数据发往哪里或写入前是否询问用户，只能由用户本人在终端修改，"
                f"不能通过 memory_config 修改。请让用户自己在终端运行：{user_only_command(protected, value)}"
            )
        if value is None:
            raise InvalidInput("修改配置需要同时提供 key 与 value")
        raw = ("true" if value else "false") if isinstance(value, bool) else str(value)
        stored = set_config_value(self.paths, key, raw)
        log(self.paths, "mcp-config-set", key=key, agent=self.host)
        return line_set_message(self.paths, key) or f"{key} 已设为 {_show_value(stored)}"

    def _show_config(self) -> str:
        config = load_config(self.paths)  # afresh: never the values of this process's start
        lines = ["当前配置："]
        for name in KEYS:
            value = getattr(config, name)
            mark = "" if config.is_set(name) else "（默认）"
            effective = line_in_effect(config, name)
            if effective is not None:
                value, note = effective
                mark = f"（{note}）"
            if KEYS[name].user_only:
                mark += "（仅用户可在终端修改）"
            lines.append(f"- {name} = {_show_value(value)}{mark}")
        state = key_state(read_key_file(self.paths), str(config.sideApiBase or ""))
        lines.append(f"- apiKey（side-secret.json）= {_KEY_STATES[state]}")
        return "\n".join(lines)


def _show_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "（按向量模型的默认值）"
    if value == "":
        return "（未设置）"
    return str(value)


def _read_lines(memories: Sequence[Memory]) -> list[str]:
    lines = []
    for i, m in enumerate(memories, 1):
        mark = "[已废弃] " if not m.active else ""
        lines.append(
            f"{i}. {mark}{inert(m.text)}（置信度 {fmt_confidence(m.confidence)}，id {m.id}，"
            f"{SCOPE_LABEL}{_scope(m)}，{inert(origin_line(m), None)}）"
        )
        if m.appliesWhen:
            lines.append(f"   {requests_line(m.appliesWhen)}")
    return lines


def _scope(memory: Memory) -> str:
    return inert(scope_text(memory.workspace, memory.workspaceName))


def _invalidated(count: int) -> list[str]:
    return [f"已作废 {count} 条指向这些记忆的待确认提案。"] if count else []


def _str_arg(args: dict[str, Any], name: str) -> str:
    value = args.get(name)
    return value.strip() if isinstance(value, str) else ""


def _id_list(args: dict[str, Any]) -> list[str]:
    ids: list[str] = []
    raw = args.get("ids")
    if isinstance(raw, list):
        ids += [i.strip() for i in raw if isinstance(i, str) and i.strip()]
    elif isinstance(raw, str) and raw.strip():
        ids += [part for part in raw.replace("，", ",").replace(",", " ").split() if part]
    single = _str_arg(args, "id")
    if single:
        ids.insert(0, single)
    return list(dict.fromkeys(ids))


# ---------------------------------------------------------------------------------------------
# The MCP wiring (SDK imported here only: the hook never imports this module)
# ---------------------------------------------------------------------------------------------


def build_server(tools: MemoryTools) -> Any:
    import anyio
    import mcp_types as types
    from mcp.server import Server

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(name=t["name"], description=t["description"], input_schema=t["inputSchema"])
                for t in TOOLS
            ]
        )

    async def call_tool(ctx: Any, params: Any) -> types.CallToolResult:
        name = params.name
        arguments = dict(params.arguments or {})
        try:
            text = await anyio.to_thread.run_sync(tools.call, name, arguments)
        except MemselfError as exc:
            return _result(types, f"执行失败：{exc}", True)
        except Exception as exc:  # a bug must reach the model as a failed call, not kill the server
            log(tools.paths, "mcp-tool-crashed", tool=name, error=f"{type(exc).__name__}: {exc}")
            return _result(types, f"执行失败：{type(exc).__name__}: {exc}", True)
        return _result(types, text, False)

    return Server(SERVER_NAME, version=__version__, on_list_tools=list_tools, on_call_tool=call_tool)


def _result(types: Any, text: str, is_error: bool) -> Any:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=is_error)


def serve(host: str, paths: DataPaths | None = None) -> None:
    """Run the server on stdin/stdout until the client closes the connection."""
    import anyio
    from mcp.server.stdio import stdio_server

    # Hosts start the server in the project: its working directory names the current workspace.
    server = build_server(MemoryTools(paths or DataPaths.default(), host, workspace=current_workspace()))

    async def main() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(main)
