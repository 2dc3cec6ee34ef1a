"""``memself sync init|status`` and the sync itself: fetch, merge, write back, push.

One sync, under the sync lock (one sync per data directory at a time):

1. fetch the remote branch;
2. merge, three-way by memory id (``memself.sync.merge``): the base is the last commit this
   machine knows its memories hold in full (``refs/memself/base``), the other sides are the
   memories on disk and the fetched commit;
3. write the result through ``MemoryStore.replace_contents`` (under the write lock; a write
   made since it was read is part of what is merged, never overwritten);
4. the fetched commit is now held in full: it becomes the base;
5. commit the canonical files on top of the fetched commit and push it; a rejected push (the
   remote moved on) starts again at 1; a pushed commit becomes the base.

A kill anywhere leaves a state the next sync merges again to the same result: the store is
replaced as one step, the refs move after what they name is on disk, and merging a state with
itself changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from filelock import FileLock, Timeout

from memself.errors import MemselfError
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore, TrashEntry
from memself.store.records import GROUPS, Memory
from memself.sync import canonical, state
from memself.sync.gitrepo import BASE_REF, FILES, REMOTE_REF, PushRejected, Repo, SyncUnreachable
from memself.sync.merge import MergeReport, merge
from memself.sync.workspaces import WorkspaceMap
from memself.timeutil import iso

MAX_ROUNDS = 8
_LOCK_WAIT_S = 120


class NotConfigured(MemselfError):
    pass


@dataclass
class SyncResult:
    report: MergeReport = field(default_factory=MergeReport)
    pushed: bool = False
    quarantined: int = 0
    rounds: int = 0


@dataclass
class Pending:
    """What this machine holds that the remote does not have yet (by the last synced base)."""

    added: int
    changed: int
    deleted: int
    trash: int

    @property
    def total(self) -> int:
        return self.added + self.changed + self.deleted + self.trash


def init(paths: DataPaths, url: str) -> Repo:
    if not url.strip():
        raise MemselfError("请给出同步仓库的地址（本地路径、ssh 或 https）")
    paths.ensure()
    paths.sync_dir.mkdir(mode=0o700, exist_ok=True)
    repo = Repo(state.repo_dir(paths))
    with _sync_lock(paths):
        repo.init(url.strip())
    state.save(paths, remote=url.strip())
    return repo


def _repo(paths: DataPaths) -> Repo:
    repo = Repo(state.repo_dir(paths))
    if not repo.exists() or repo.remote_url() is None:
        raise NotConfigured("还没有设置同步：请先运行 memself sync init <仓库地址>")
    return repo


def _sync_lock(paths: DataPaths) -> FileLock:
    paths.sync_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    return FileLock(str(state.lock_file(paths)), timeout=_LOCK_WAIT_S)


def sync(paths: DataPaths, now: datetime) -> SyncResult:
    repo = _repo(paths)
    try:
        with _sync_lock(paths):
            return _sync_locked(paths, repo, now)
    except Timeout as exc:
        raise MemselfError("另一次同步正在进行，请稍后再试") from exc
    except SyncUnreachable as exc:
        state.save(paths, lastError=str(exc), lastAttempt=iso(now))
        raise SyncUnreachable(
            f"无法连接同步仓库（{repo.remote_url()}）：{exc}。本地记忆照常读写，下次同步时会补上。"
        ) from exc


def _sync_locked(paths: DataPaths, repo: Repo, now: datetime) -> SyncResult:
    repo.clear_stale_locks()
    store = MemoryStore(paths)
    result = SyncResult()
    for round_no in range(1, MAX_ROUNDS + 1):
        result.rounds = round_no
        repo.fetch()
        remote_commit = repo.resolve(REMOTE_REF)
        base = canonical.from_files(_files(repo, repo.resolve(BASE_REF)))
        remote = canonical.from_files(_files(repo, remote_commit))
        merged_box: list[canonical.Snapshot] = []
        wmap = WorkspaceMap(paths)
        wmap.remember(base, remote)

        def compute(
            groups: dict[str, list[Memory]],
            trash: list[TrashEntry],
            base: canonical.Snapshot = base,
            remote: canonical.Snapshot = remote,
            box: list[canonical.Snapshot] = merged_box,
            wmap: WorkspaceMap = wmap,
        ) -> tuple[dict[str, list[Memory]], list[TrashEntry]] | None:
            local = canonical.from_store(groups, trash)
            merged, report = merge(base, wmap.to_shared(local), remote, now)
            box.append(merged)
            result.report = report
            here = wmap.to_local(merged)
            if here.memories == local.memories and here.trash == local.trash:
                return None
            return canonical.to_store(here)

        store.replace_contents(compute)
        wmap.save()
        merged = merged_box[-1]
        result.quarantined += state.quarantine(paths, remote.bad)
        if remote_commit is not None:
            repo.set_ref(BASE_REF, remote_commit)
        files = canonical.to_files(merged)
        tree = repo.make_tree(files)
        if remote_commit is not None and repo.tree_of(remote_commit) == tree:
            head = remote_commit
        else:
            head = repo.commit(tree, remote_commit, f"memself sync {iso(now)}")
            try:
                repo.push(head)
            except PushRejected:
                continue
            result.pushed = True
        repo.set_ref(BASE_REF, head)
        repo.checkout(head)
        state.save(paths, lastSync=iso(now), lastError="")
        return result
    raise MemselfError(f"同步仓库连续 {MAX_ROUNDS} 次在推送前被别处更新，请稍后再试")


def _files(repo: Repo, commit: str | None) -> dict[str, bytes]:
    return {name: repo.read(commit, name) for name in FILES}


def pending(paths: DataPaths) -> Pending:
    repo = _repo(paths)
    base = canonical.from_files(_files(repo, repo.resolve(BASE_REF)))
    store = MemoryStore(paths)
    wmap = WorkspaceMap(paths)
    wmap.remember(base)
    local = wmap.to_shared(
        canonical.from_store({g: store.load_group(g).memories for g in GROUPS}, store.load_trash().entries)
    )
    added = sum(1 for k in local.memories if k not in base.memories)
    deleted = sum(1 for k in base.memories if k not in local.memories)
    changed = sum(1 for k, v in local.memories.items() if k in base.memories and base.memories[k] != v)
    trash = len(set(local.trash) ^ set(base.trash))
    return Pending(added, changed, deleted, trash)


def configured(paths: DataPaths) -> bool:
    """Whether ``memself sync init`` set a remote up (without running git)."""
    return bool(state.load(paths).get("remote")) and state.repo_dir(paths).is_dir()


def status(paths: DataPaths) -> tuple[dict[str, object], Pending]:
    repo = _repo(paths)
    info: dict[str, object] = dict(state.load(paths))
    info["remote"] = repo.remote_url() or ""
    return info, pending(paths)
