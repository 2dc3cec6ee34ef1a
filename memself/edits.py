"""Changes a person asks for (the CLI, or an assistant through MCP's ``memory_update``): delete,
merge, replace and move (a new scope), each with its consequence for pending proposals.

A proposal waiting in a popup names the memory it would reinforce, merge into or replace; once
that memory is deleted, merged away or rewritten, the popup would describe something that no
longer is; once it moved to another scope, the proposal was judged for a conversation whose
workspace may no longer see it. So every change made here ends those proposals (``none`` /
``target-changed``), and this module is the one place that rule is kept.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from memself.judge import jobs
from memself.paths import DataPaths
from memself.store.memory_store import Change, MemoryStore
from memself.store.records import Memory
from memself.store.workspaces import Workspace
from memself.timeutil import iso


@dataclass(frozen=True)
class Deleted:
    removed: list[Memory]  # what went to the trash; ids that were not found are not here
    invalidated: int  # pending proposals aimed at them, now ended


@dataclass(frozen=True)
class Rewritten:
    change: Change
    invalidated: int


@dataclass(frozen=True)
class Moved:
    memory: Memory
    previous: str  # the workspace key it had ("": global)
    invalidated: int

    @property
    def changed(self) -> bool:
        return self.previous != self.memory.workspace


def delete(store: MemoryStore, ids: Iterable[str], now: datetime) -> Deleted:
    """Move the memories to the trash (``MemoryStore.delete``: all unknown is an error)."""
    removed = store.delete(ids, now)
    return Deleted(removed, invalidate_proposals(store.paths, [m.id for m in removed], now))


def merge(store: MemoryStore, keep_id: str, drop_id: str, text: str, now: datetime) -> Rewritten:
    """Keep ``keep_id`` with ``text`` and the higher confidence; ``drop_id`` goes to the trash."""
    change = store.merge_pair(keep_id, drop_id, text, now)
    return Rewritten(change, invalidate_proposals(store.paths, [keep_id, drop_id], now))


def replace(store: MemoryStore, mem_id: str, text: str, now: datetime) -> Rewritten:
    """Rewrite one memory's text; its confidence stays."""
    change = store.replace(mem_id, text, now)
    return Rewritten(change, invalidate_proposals(store.paths, [mem_id], now))


def move(store: MemoryStore, mem_id: str, workspace: Workspace | None, now: datetime) -> Moved:
    """Give one memory a new scope (None: global); a move to the scope it has changes nothing."""
    memory, previous = store.move(mem_id, workspace, now)
    ended = invalidate_proposals(store.paths, [mem_id], now) if previous != memory.workspace else 0
    return Moved(memory, previous, ended)


def invalidate_proposals(paths: DataPaths, ids: Iterable[str], now: datetime) -> int:
    """End the pending proposals aimed at ``ids`` as ``none`` / ``target-changed``; how many."""
    wanted = set(ids)
    if not wanted:
        return 0
    count = 0
    for job in jobs.list_jobs(paths, now):
        proposal = job.get("proposal")
        if (
            job.get("status") == jobs.READY
            and not job.get("applied")
            and isinstance(proposal, dict)
            and proposal.get("targetId") in wanted
        ):
            if jobs.update_job(paths, job["id"], lambda j: _still_pending(j) and _end(j, now)):
                count += 1
    return count


def _still_pending(job: jobs.Job) -> bool:
    return job.get("status") == jobs.READY and not job.get("applied")


def _end(job: jobs.Job, now: datetime) -> bool:
    job.update(status=jobs.NONE, reason="target-changed", finishedAt=iso(now))
    return True
