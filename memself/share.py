"""``memself share ID``: a copy of one of the user's memories in the repository's ``.memself/``,
for the user to review and commit (never committed here).

The copy is a record in the original's format in ``.memself/<group>.jsonl`` at the repository's
root, the file ``memself.store.team`` reads for everyone who works in it. What is private to this
machine stays out of it: the workspace path, the evidence (the user's own words), the daily gain
and any field a hand edit added. The repository is shared text, so nothing secret-looking goes
into it: a memory whose text or requests redaction would change is refused, and so is one that
carries the plugin's own marker or notice header (in any spelling ``inert`` folds). The file is only ever
appended to (never rewritten): lines it holds that the team reader skips stay as they are, and
the user is told about them.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field

from memself.errors import InvalidInput, NotFound
from memself.platform import files as platform_files
from memself.store import team
from memself.store.memory_store import MemoryStore
from memself.store.recordlines import encode_record
from memself.store.records import Memory, check_text
from memself.store.workspaces import Workspace, display_name
from memself.text.messages import MARKER_STANDIN, NOTICE_STANDIN, inert
from memself.text.redact import redact


@dataclass(frozen=True)
class Shared:
    memory: Memory  # the user's own memory that was shared
    root: str  # the repository's root
    relative: str  # ".memself/rule.jsonl"
    already: bool = False  # the file already held it: nothing was written
    unreadable_lines: list[int] = field(default_factory=list)  # lines the team reader skips

    @property
    def path(self) -> str:
        return os.path.join(self.root, self.relative)


def share(store: MemoryStore, mem_id: str, workspace: Workspace | None) -> Shared:
    """Share the memory ``mem_id`` into the repository of ``workspace``."""
    if mem_id.startswith(team.ID_PREFIX):
        raise InvalidInput(f"「{mem_id}」已经是仓库 .memself/ 里的团队记忆，不需要再共享")
    memory = store.get(mem_id)
    if memory is None:
        raise NotFound(f"没有 id 为「{mem_id}」的记忆（memself list 可查看 id）")
    if workspace is None or not team.is_repository(workspace.key):
        raise InvalidInput("当前目录不在 git 仓库里：团队记忆放在仓库根目录的 .memself/ 下，请在仓库里运行")
    if memory.workspace and memory.workspace != workspace.key:
        raise InvalidInput(
            f"这条记忆只属于项目 {memory.workspaceName or display_name(memory.workspace)}"
            f"（{memory.workspace}），不能共享到 {workspace.key}"
        )
    return share_memory(memory, workspace.key)


def share_memory(memory: Memory, root: str) -> Shared:
    """Append ``memory``'s shareable record to ``root``'s ``.memself/<group>.jsonl``."""
    if not team.is_repository(root):
        raise InvalidInput("当前目录不在 git 仓库里：团队记忆放在仓库根目录的 .memself/ 下，请在仓库里运行")
    text = check_text(memory.text)
    if redact(text) != text or any(redact(r) != r for r in memory.appliesWhen):
        raise InvalidInput(
            "这条记忆的正文或适用场景里有像密钥、密码、令牌或个人信息的内容，不能写进仓库共享给团队；"
            "先用 memself delete 删掉它，再不带这些内容重新添加后共享"
        )
    shown = inert(text)
    if any(mark in shown and mark not in text for mark in (MARKER_STANDIN, NOTICE_STANDIN)):
        # Every reader shows it inertly anyway; a plugin marker has no business in a shared file.
        raise InvalidInput("这条记忆的正文里有记忆插件自己的标记或通知标题，不能写进仓库共享给团队")
    if not memory.active:
        raise InvalidInput("这条记忆已废弃（置信度过低），不能共享；先强化或重新添加它")
    relative = f"{team.TEAM_DIR}/{memory.category}.jsonl"
    folder = os.path.join(root, team.TEAM_DIR)
    path = os.path.join(root, relative)
    _ensure_folder(folder)
    existing = _existing(path, relative)
    lines = existing.splitlines()
    found = [team.parse_line(line, memory.category) if line.strip() else None for line in lines]
    unreadable = [
        n for n, (line, m) in enumerate(zip(lines, found, strict=True), 1) if line.strip() and m is None
    ]
    if any(m is not None and m.text == text for m in found):
        return Shared(memory, root, relative, already=True, unreadable_lines=unreadable)
    older = next((n for n, m in enumerate(found, 1) if m is not None and m.id == memory.id), None)
    if older is not None:
        # An earlier share of this memory, before its text changed: the file is only appended to.
        raise InvalidInput(
            f"{relative} 第 {older} 行是这条记忆共享时的旧正文；memself 只追加、不改写仓库里的文件，"
            "请手动把那一行的 text 改成新正文（或删掉那一行后再共享）"
        )
    if sum(1 for m in found if m is not None) >= team.MAX_MEMORIES:
        raise InvalidInput(f"{relative} 已有 {team.MAX_MEMORIES} 条记忆，团队读取时最多读这么多，没有再追加")
    line = encode_record(_record(memory, text))
    lead = b"\n" if existing and not existing.endswith(b"\n") else b""
    if len(existing) + len(lead) + len(line) > team.MAX_BYTES:
        raise InvalidInput(f"{relative} 追加后会超过团队读取的上限（{team.MAX_BYTES // 1024} KiB），没有追加")
    # Others may read the team file: 0644; a link planted at its name is refused.
    platform_files.append_whole(path, lead + line, 0o644, follow=False, durable=True)
    return Shared(memory, root, relative, unreadable_lines=unreadable)


def _record(memory: Memory, text: str) -> dict[str, object]:
    record: dict[str, object] = {
        "id": memory.id,
        "text": text,
        "confidence": memory.to_json()["confidence"],
        "category": memory.category,
        "evidence": "",
        "firstSeen": memory.firstSeen,
        "lastSeen": memory.lastSeen,
        "deprecated": False,
        "createdAt": memory.createdAt,
    }
    if memory.appliesWhen:
        record["appliesWhen"] = list(memory.appliesWhen)
    return record


def _ensure_folder(folder: str) -> None:
    try:
        mode = os.lstat(folder).st_mode
    except FileNotFoundError:
        os.mkdir(folder)
        return
    if not stat.S_ISDIR(mode):
        raise InvalidInput(f"{folder} 不是普通文件夹（可能是链接或文件），没有写入；请检查后再试")


def _existing(path: str, relative: str) -> bytes:
    """The file's bytes ("" when absent); a link or anything but a regular file is refused."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return b""
    if not stat.S_ISREG(mode):
        raise InvalidInput(f"{relative} 不是普通文件（可能是链接），没有写入；请检查后再试")
    with open(path, "rb") as handle:
        data = handle.read(team.MAX_BYTES + 1)
    if len(data) > team.MAX_BYTES:
        raise InvalidInput(f"{relative} 已超过团队读取的上限（{team.MAX_BYTES // 1024} KiB），没有追加")
    return data
