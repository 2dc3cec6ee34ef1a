"""The detached judge process: one job, at most two model calls, one defined end state.

remember call -> (dedup call against the 3 nearest active memories the turn's workspace sees)
-> proposal (with its scope when the turn has a workspace) ->
confirm off: written through the store and a notice left for Stop; confirm on: ``ready``
with the proposal for the popup. Every failure ends the job as ``none`` with a reason and
nothing half-written: the store is only touched after both calls succeeded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from memself.config import Config, load_config
from memself.errors import InvalidInput, KeyEndpointMismatch, KeyFileInvalid, KeyUnconfirmed, MemselfError
from memself.judge import jobs, prompts, runlock
from memself.judge.apply import apply_proposal
from memself.judge.bounds import bounded_proposal
from memself.judge.credentials import key_for_endpoint, read_key_file, shown_base
from memself.judge.http import DEFAULT_TIMEOUT_S, chat
from memself.judge.parse import DedupAnswer, parse_dedup, parse_remember
from memself.logs import log
from memself.paths import DataPaths
from memself.store import team
from memself.store.memory_store import MemoryStore
from memself.store.records import TEAM, WORKSPACE, Memory, check_text
from memself.store.workspaces import Workspace

# (text, k, workspace key): the k nearest active memories that workspace sees ("": global only).
NearestFn = Callable[[str, int, str], Sequence[tuple[Memory, float]]]
ChatFn = Callable[[str, str], str]  # (system, user) -> assistant text
NEAREST_K = 3


class _Stop(Exception):
    """End the job as ``none`` with this reason (an expected outcome, not a crash)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def run_job(
    job_file: Path,
    now_fn: Callable[[], datetime],
    nearest_fn: NearestFn,
    store: MemoryStore,
    config: Config,
    *,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> jobs.Job | None:
    """Run one judge job to its end state; returns the job as finally saved (``None`` if it was
    not this process's to run: missing, or no longer ``running``)."""
    paths = store.paths
    job = jobs.read_job(job_file)
    if job is None or job.get("status") != jobs.RUNNING:
        return None
    sid = job["id"]
    if jobs.untrusted(paths, job, "judge"):
        # Not created by the prompt hook: its prompt is nobody's to send anywhere.
        return jobs.finish(paths, sid, now_fn(), jobs.NONE, "seal-invalid")
    api_key = ""
    try:
        if not config.sideApiBase or not config.sideApiModel:
            raise _Stop("api-not-configured")
        api_key, base = _key_for(paths, sid, str(config.sideApiBase))

        def call(system: str, user: str) -> str:
            return chat(base, config.sideApiModel, api_key, system, user, timeout)

        proposal = build_proposal(job, call, nearest_fn)
        if config.confirm:
            return jobs.finish(paths, sid, now_fn(), jobs.READY, proposal=proposal)
        # The workspace of the job whose seal was checked above, never of a file read later.
        return _apply_now(paths, store, sid, proposal, now_fn, jobs.job_workspace(job))
    except _Stop as stop:
        log(paths, "side-job-none", id=sid, reason=stop.reason)
        return jobs.finish(paths, sid, now_fn(), jobs.NONE, stop.reason)
    except Exception as exc:
        reason = str(exc) if isinstance(exc, MemselfError) else f"{type(exc).__name__}: {exc}"
        if api_key:
            reason = reason.replace(api_key, "")
        log(paths, "side-job-failed", id=sid, reason=reason)
        return jobs.finish(paths, sid, now_fn(), jobs.NONE, reason)


def _key_for(paths: DataPaths, sid: str, configured_base: str) -> tuple[str, str]:
    """The key and the endpoint it is bound to; a job whose endpoint is not the key's ends here,
    before a single byte is sent."""
    try:
        return key_for_endpoint(paths, configured_base)
    except KeyEndpointMismatch:
        found = read_key_file(paths)
        log(
            paths,
            "side-endpoint-mismatch",
            id=sid,
            configured=shown_base(configured_base),
            bound=shown_base(found.bound_base),
        )
        raise _Stop("endpoint-mismatch") from None
    except KeyUnconfirmed:
        log(paths, "side-key-unconfirmed", id=sid, configured=shown_base(configured_base))
        raise _Stop("key-unconfirmed") from None
    except KeyFileInvalid as exc:
        raise _Stop(
            "api-key-unusable" if read_key_file(paths).state == "invalid" else "api-not-configured"
        ) from exc


def build_proposal(job: jobs.Job, call: ChatFn, nearest_fn: NearestFn) -> dict[str, Any]:
    """Both model calls; raises ``_Stop`` for "not a memory" and "unusable answer"."""
    prompt = str(job.get("prompt") or "")
    turn = jobs.job_workspace(job)
    key = turn.key if turn is not None else ""
    in_repository = turn is not None and team.is_repository(turn.key)
    answer = parse_remember(
        call(prompts.remember_system(turn is not None, in_repository), prompts.remember_user_message(prompt))
    )
    if answer is None:
        raise _Stop("judge-failed")
    if not answer.remember:
        raise _Stop("not-memory")
    text = _checked(answer.text)
    if text is None:
        raise _Stop("invalid-text")
    # Another workspace's memories are never a target: checked here too, whatever answered.
    found = nearest_fn(text, NEAREST_K, key)
    nearest = [(m, s) for m, s in found if m.active and m.visible_in(key)][:NEAREST_K]
    if nearest:
        reply = call(
            prompts.DEDUP_SYSTEM, prompts.dedup_user_message(text, [(m.id, m.text) for m, _ in nearest])
        )
        decision = parse_dedup(reply, [m.id for m, _ in nearest])
        if decision.action == "merge":
            merged = _checked(decision.merged_text)
            decision = (
                DedupAnswer("unsure")
                if merged is None
                else DedupAnswer("merge", decision.target_id, merged, decision.applies_when)
            )
    else:
        decision = DedupAnswer("create")
    target: Memory | None = None
    score: float | None = nearest[0][1] if nearest else None
    if decision.action != "create":
        # ``unsure`` offers the nearest memory as the reinforce target.
        target_id = decision.target_id or nearest[0][0].id
        target, score = next((m, s) for m, s in nearest if m.id == target_id)
    proposal: dict[str, Any] = {
        "text": text,
        "evidence": answer.evidence or prompt[:200],
        "category": answer.group,
        "action": decision.action,
        "targetId": target.id if target else "",
        "targetText": target.text if target else "",
        "targetCategory": target.category if target else "",
        "mergedText": decision.merged_text,
        "score": round(score, 4) if score is not None else None,
    }
    # Only when there are any: a proposal without them is exactly the original's shape. Inside the
    # proposal they are covered by the job's seal like the text.
    if answer.applies_when:
        proposal["appliesWhen"] = list(answer.applies_when)
    if turn is not None:  # without a workspace everything is global: the original's shape
        # Team was offered only in a repository: an answer that says it elsewhere is this one's.
        proposal["scope"] = WORKSPACE if answer.scope == TEAM and not in_repository else answer.scope
    merged_when = decision.applies_when or answer.applies_when  # the new statement is in the merge
    if decision.action == "merge" and merged_when:
        proposal["mergedAppliesWhen"] = list(merged_when)
    return bounded_proposal(proposal)


def _checked(text: str) -> str | None:
    """The judge's text as the store keeps it (one line, 6-400 characters), or None: the popup
    and the notices then quote exactly what would be written."""
    try:
        return check_text(text)
    except InvalidInput:
        return None


def _apply_now(
    paths: DataPaths,
    store: MemoryStore,
    sid: str,
    proposal: dict[str, Any],
    now_fn: Callable[[], datetime],
    turn: Workspace | None = None,
) -> jobs.Job | None:
    current = jobs.load_job(paths, sid)
    if current is None or current.get("status") != jobs.RUNNING or current.get("prompted"):
        # Stop already gave up on this job (judge-timeout): writing now would be a surprise.
        log(paths, "side-job-late", id=sid)
        return None
    action = proposal["action"]
    if action == "unsure":
        # Without a popup nobody can choose; a separate memory loses nothing.
        log(paths, "side-unsure-created", id=sid, target=proposal.get("targetId"))
        action = "create"
    now = now_fn()
    notice = apply_proposal(store, proposal, action, str(proposal["category"]), now, turn=turn)
    return jobs.finish(paths, sid, now, jobs.READY, proposal=proposal, applied=True, notice=notice)


def engine_nearest(store: MemoryStore, timeout_s: float = 60.0) -> NearestFn:
    """Nearest active memories through the warm engine (``nearest`` op, dedup: no rewards), among
    those ``workspace`` sees (the engine scopes its search; the store's view checks it again).

    With no such memory at all the engine is not even asked: the action is simply create.
    """

    def nearest(text: str, k: int, workspace: str) -> Sequence[tuple[Memory, float]]:
        active = {m.id: m for m in store.all() if m.active and m.visible_in(workspace)}
        if not active:
            return []
        from memself.engine.client import call_engine
        from memself.engine.protocol import OP_NEAREST

        payload = {"text": text, "k": k, "workspace": workspace}
        result = call_engine(store.paths, OP_NEAREST, payload, timeout_s)
        items = result.get("items") or result.get("hits") or []
        pairs: list[tuple[Memory, float]] = []
        for item in items:
            memory = active.get(str(item.get("id")))
            if memory is not None:
                pairs.append((memory, float(item.get("score", 0.0))))
        return pairs[:k]

    return nearest


def run_detached(job_file: Path) -> None:
    """Entry of ``memself side-run <jobfile>``: the real clock, store, config and engine.

    The hook that spawned us handed over the job's run lock as fd ``runlock.RUN_LOCK_FD``; it
    stays open, untouched, until this process exits, which is how Stop tells a judge that died
    from one still working. Where locks are not inherited, the judge takes its own first."""
    job_file = job_file.resolve()
    paths = DataPaths(job_file.parent.parent)
    if job_file.parent != paths.side_dir or not job_file.name.endswith(".json"):
        raise MemselfError(f"不是旁路任务文件：{job_file}")
    runlock.hold_as_judge(paths, job_file.name[: -len(".json")])
    store = MemoryStore(paths)
    run_job(job_file, lambda: datetime.now(timezone.utc), engine_nearest(store), store, load_config(paths))
