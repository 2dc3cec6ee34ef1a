"""``memory_resolve``: write one proposal the user chose in the popup, and nothing else (§4.9).

The caller (the host's model) only names a sessionID and a decision. The job must belong to this
host, have been shown in a popup and not yet be answered; the decision must be one the popup
offered; text, target and merged text come from the proposal; the job must carry the plugin's
seal (``memself.judge.seal``), so a forged, edited or re-armed file is refused. No config is read.

Scope: ``create_rule`` / ``create_project`` write in the scope the judge recommended; the
explicit ``create_<group>_here`` (the turn's workspace) and ``create_<group>_all`` (global) exist
only for a job whose turn had a workspace, and that workspace is the job's sealed one. Reinforce,
merge and replace keep the target's scope.
"""

from __future__ import annotations

from datetime import datetime

from memself.errors import MemselfError
from memself.judge import jobs, seal
from memself.judge.apply import apply_proposal
from memself.judge.credentials import read_session_secret
from memself.judge.proposal_id import is_proposal_id
from memself.logs import log
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from memself.store.records import GROUPS, TEAM
from memself.text.messages import SCOPE_DECISIONS, TEAM_SUFFIX, recommended_scope
from memself.timeutil import iso

SCOPED_CREATES = {
    f"create_{group}_{suffix}": (group, scope)
    for group in GROUPS
    for scope, suffix in SCOPE_DECISIONS.items()
}
# Offered only for a proposal the judge recommended for the team (a turn in a git repository):
# they write into the repository's .memself/, so no call may pick them unasked.
TEAM_CREATES = {f"create_{group}_{TEAM_SUFFIX}": group for group in GROUPS}
DECISIONS = (
    "create_rule",
    "create_project",
    *SCOPED_CREATES,
    *TEAM_CREATES,
    "reinforce",
    "merge",
    "replace",
    "discard",
)
MSG_INVALID = "sessionID 或 decision 无效，已拒绝处理。"
MSG_NOT_FOUND = "未找到可处理的记忆分析会话，可能已处理、过期或不属于当前客户端。"
MSG_MISMATCH = "decision 与本次记忆分析提供的选项不匹配，已拒绝处理。"
MSG_DISCARDED = "本次记忆已不落成。"
MSG_TAMPERED = (
    "这条记忆分析会话的文件没有通过插件的校验（不是插件生成的，或生成后被改动过），"
    "已拒绝处理，也不会写入任何记忆。"
)


class ResolveRejected(MemselfError):
    """The sessionID or decision is not one this host may resolve now."""


def allowed_decisions(proposal: dict[str, object], has_workspace: bool = False) -> set[str]:
    """Create (either group) and discard always; a create in an explicit scope when the turn had
    a workspace; the others only when the popup offered them."""
    allowed = {"create_rule", "create_project", "discard"}
    if has_workspace:
        allowed.update(SCOPED_CREATES)
        if recommended_scope(proposal) == TEAM:
            allowed.update(TEAM_CREATES)
    action = proposal.get("action")
    target = proposal.get("targetId")
    if action in ("reinforce", "unsure") and target:
        allowed.add("reinforce")
    if action == "merge" and target and proposal.get("mergedText"):
        allowed.add("merge")
    if action == "replace" and target:
        allowed.add("replace")
    return allowed


def resolve(
    paths: DataPaths, store: MemoryStore, host: str, session_id: str, decision: str, now: datetime
) -> str:
    """Apply ``decision`` to the proposal of ``session_id``; returns the notice for the user.

    Raises ``ResolveRejected`` with the original's exact messages. Creates no file when the
    sessionID is unknown.
    """
    if not is_proposal_id(session_id) or decision not in DECISIONS:
        raise ResolveRejected(MSG_INVALID)
    if not jobs.job_path(paths, session_id).is_file():
        raise ResolveRejected(MSG_NOT_FOUND)  # before the lock: an unknown id creates nothing
    # The side lock is held across the store write so two resolves of one id apply once.
    with jobs.side_lock(paths):
        job = jobs.load_job(paths, session_id)
        secret = read_session_secret(paths)
        if job is not None and jobs.untrusted(paths, job, "resolve"):
            if job.get("status") == jobs.READY:
                job.pop(seal.MAC_FIELD, None)
                job.update(status=jobs.NONE, reason="seal-invalid", finishedAt=iso(now))
                jobs.save_job(paths, job)
            raise ResolveRejected(MSG_TAMPERED)
        proposal = job.get("proposal") if job else None
        if (
            job is None
            or secret is None
            or job.get("agent") != host
            or not job.get("prompted")
            or job.get("applied")
            or job.get("status") != jobs.READY
            or not isinstance(proposal, dict)
            or not proposal.get("text")
        ):
            raise ResolveRejected(MSG_NOT_FOUND)
        turn = jobs.job_workspace(job)
        if decision not in allowed_decisions(proposal, turn is not None):
            raise ResolveRejected(MSG_MISMATCH)
        if decision == "discard":
            job.update(status=jobs.NONE, reason="user-skip", finishedAt=iso(now))
            seal.seal_job(job, secret)
            jobs.save_job(paths, job)
            return MSG_DISCARDED
        scope = ""  # the judge's
        if decision in SCOPED_CREATES:
            action, (group, scope) = "create", SCOPED_CREATES[decision]
        elif decision in TEAM_CREATES:
            action, group, scope = "create", TEAM_CREATES[decision], TEAM
        elif decision.startswith("create_"):
            action, group = "create", decision.removeprefix("create_")
        else:
            action, group = decision, str(proposal.get("category") or "rule")
        notice = apply_proposal(
            store,
            proposal,
            action,
            group,
            now,
            resolve_style=True,
            turn=turn,
            create_scope=scope,
            share_team=decision in TEAM_CREATES,
        )
        job.update(status=jobs.NONE, applied=True, notice=notice, reason=decision, finishedAt=iso(now))
        seal.seal_job(job, secret)  # re-arming it (applied back to false) breaks the seal
        jobs.save_job(paths, job)
    log(paths, "side-resolved", id=session_id, decision=decision)
    return notice
