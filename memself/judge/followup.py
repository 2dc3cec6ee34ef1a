"""Stop: wait for this session's judge jobs, then show results or ask for confirmation (§4.7).

Only jobs of exactly this host and session are waited for, shown, superseded or marked; every
other job stays in the pool for its own Stop. Returns ``(visible_text, model_text)`` for the
host adapter to render as its continuation, or ``None`` when the turn simply ends.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import os
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

from memself.atomic import write_atomic
from memself.config import Config
from memself.errors import MemselfError
from memself.hosts.base import Popup
from memself.judge import jobs, runlock, seal
from memself.judge.apply import apply_proposal
from memself.judge.credentials import read_session_secret
from memself.logs import log
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from memself.text.messages import (
    CONFIRM_HEADING,
    NOTICE_HEADER,
    RESULT_HEADING,
    STALE_CONFIRMATION,
    confirm_texts,
    direct_texts,
)
from memself.timeutil import iso

POLL_S = 0.2
JUDGE_DIED = "judge-died"


def followup(
    paths: DataPaths,
    store: MemoryStore,
    config: Config,
    host: str,
    session_key: str,
    popup: Popup,
    now_fn: Callable[[], datetime],
    sleep: Callable[[float], None] = time.sleep,
    *,
    keep_model_text: bool = False,
    max_wait_s: float | None = None,
) -> tuple[str, str] | None:
    """The Stop continuation for this host+session, or ``None``.

    ``popup`` is the host's (``HostAdapter.POPUP``). ``keep_model_text`` is for hosts that show
    the continuation to the user as a prompt: the model text is saved and handed back by
    ``restore_continuation_prompt`` on the next prompt. ``max_wait_s`` caps the
    wait for running jobs below ``sideWaitMs`` (the hook's deadline); jobs still running then
    are left for the next Stop.
    """
    if not session_key:
        log(paths, "旁路结果缺少稳定会话 ID，已跳过", agent=host)
        return None
    wait_s = max(0, int(config.sideWaitMs)) / 1000
    if max_wait_s is not None:
        wait_s = max(0.0, min(wait_s, max_wait_s))
    mine = _wait_for_jobs(paths, host, session_key, wait_s, now_fn, sleep)
    now = now_fn()
    shown = _trusted([j for j in mine if _pending(j)], paths, now)
    if not shown:
        return None
    if not config.confirm:
        result = _direct(paths, store, shown, now)
    else:
        result = _confirm(paths, mine, shown, popup, now)
    if result is not None and keep_model_text:
        save_confirm_pair(paths, host, session_key, result[0], result[1])
    return result


def take_followup(
    paths: DataPaths,
    config: Config,
    host: str,
    session_key: str,
    popup: Popup,
    now: datetime,
    *,
    keep_model_text: bool = True,
    sleep: Callable[[float], None] = time.sleep,
    max_wait_s: float | None = None,
) -> tuple[str, str] | None:
    """What the Stop hook calls: ``followup`` with the store and a clock that starts at ``now``.

    ``keep_model_text`` defaults to on for every host: hosts that do not feed the visible text
    back as a prompt simply never restore it, and stale pair files are pruned after 24 h.
    """
    started = time.monotonic()

    def clock() -> datetime:
        return now + timedelta(seconds=time.monotonic() - started)

    return followup(
        paths,
        MemoryStore(paths),
        config,
        host,
        session_key,
        popup,
        clock,
        sleep,
        keep_model_text=keep_model_text,
        max_wait_s=max_wait_s,
    )


def _wait_for_jobs(
    paths: DataPaths,
    host: str,
    session_key: str,
    wait_s: float,
    now_fn: Callable[[], datetime],
    sleep: Callable[[float], None],
) -> list[jobs.Job]:
    deadline = now_fn() + timedelta(seconds=wait_s)
    while True:
        now = now_fn()
        mine = jobs.session_jobs(paths, host, session_key, now)
        if jobs.expire_stuck(paths, mine, now) + _finish_dead(paths, mine, now):
            mine = jobs.session_jobs(paths, host, session_key, now)
        if not any(j.get("status") == jobs.RUNNING for j in mine) or now >= deadline:
            return mine
        sleep(POLL_S)


def _finish_dead(paths: DataPaths, mine: list[jobs.Job], now: datetime) -> list[str]:
    """End running jobs whose judge is gone (nobody holds their run lock) as ``judge-died``."""
    ended: list[str] = []
    for job in mine:
        if job.get("status") != jobs.RUNNING or runlock.probe(paths, job["id"]) != runlock.DEAD:
            continue
        # Without force: a judge that finished the job just before it exited keeps its result.
        if jobs.finish(paths, job["id"], now, jobs.NONE, JUDGE_DIED) is not None:
            log(paths, "side-judge-died", id=job["id"])
            ended.append(job["id"])
    return ended


def _trusted(pending: list[jobs.Job], paths: DataPaths, now: datetime) -> list[jobs.Job]:
    """Only jobs the plugin sealed are applied or shown; any other ends as ``seal-invalid``."""
    kept: list[jobs.Job] = []
    for job in pending:
        if jobs.untrusted(paths, job, "stop"):
            jobs.finish(paths, job["id"], now, jobs.NONE, "seal-invalid", force=True)
        else:
            kept.append(job)
    return kept


def _pending(job: jobs.Job) -> bool:
    """Ready and never shown: a proposal to ask about, or a notice of a write already made."""
    if job.get("status") != jobs.READY or job.get("prompted"):
        return False
    if job.get("applied"):
        return bool(job.get("notice"))
    proposal = job.get("proposal")
    return isinstance(proposal, dict) and bool(proposal.get("text"))


# ---------------------------------------------------------------------------------------------
# confirm = false: results only
# ---------------------------------------------------------------------------------------------


def _direct(
    paths: DataPaths, store: MemoryStore, shown: list[jobs.Job], now: datetime
) -> tuple[str, str] | None:
    lines: list[str] = []
    for job in shown:
        notice = str(job.get("notice") or "")
        if not job.get("applied"):
            # Judged while confirm was on, now off: nobody will be asked, so write it now.
            proposal = job["proposal"]
            action = "create" if proposal.get("action") == "unsure" else str(proposal["action"])
            try:
                notice = apply_proposal(
                    store, proposal, action, str(proposal["category"]), now, turn=jobs.job_workspace(job)
                )
            except MemselfError as exc:
                log(paths, "side-apply-failed", id=job["id"], error=str(exc))
                jobs.finish(paths, job["id"], now, jobs.NONE, str(exc), force=True)
                continue
        jobs.update_job(paths, job["id"], partial(_mark_shown, now=now, notice=notice), trusted_only=True)
        lines.append(notice)
    if not lines:
        return None
    return direct_texts(lines)


def _mark_shown(job: jobs.Job, now: datetime, notice: str) -> bool:
    job.update(prompted=True, promptedAt=iso(now), applied=True, notice=notice)
    job.setdefault("finishedAt", iso(now))
    return True


# ---------------------------------------------------------------------------------------------
# confirm = true: the MEMORY_CONFIRM_V1 dialog
# ---------------------------------------------------------------------------------------------


def _confirm(
    paths: DataPaths, mine: list[jobs.Job], shown: list[jobs.Job], popup: Popup, now: datetime
) -> tuple[str, str] | None:
    proposals = [j for j in shown if not j.get("applied")]
    notices = [j for j in shown if j.get("applied")]
    if proposals:
        # A new dialog replaces the one this session left unanswered (skipped or closed).
        for old in mine:
            if old.get("status") == jobs.READY and old.get("prompted") and not old.get("applied"):
                jobs.finish(paths, old["id"], now, jobs.NONE, "superseded", force=True)
    marked: list[jobs.Job] = []
    for job in proposals:
        done = jobs.update_job(paths, job["id"], lambda j: _mark_prompted(j, now), trusted_only=True)
        if done is not None:
            marked.append(done)
    notice_lines: list[str] = []
    for job in notices:
        notice = str(job["notice"])
        if jobs.update_job(paths, job["id"], partial(_mark_shown, now=now, notice=notice), trusted_only=True):
            notice_lines.append(notice)
    if not marked:
        return direct_texts(notice_lines) if notice_lines else None
    names = [_workspace_name(j) for j in marked]
    return host_confirm_texts(
        [j["id"] for j in marked], [j["proposal"] for j in marked], notice_lines, popup, names
    )


def _workspace_name(job: jobs.Job) -> str:
    turn = jobs.job_workspace(job)
    return turn.name if turn is not None else ""


def _mark_prompted(job: jobs.Job, now: datetime) -> bool:
    if job.get("status") != jobs.READY or job.get("prompted") or job.get("applied"):
        return False
    job.update(prompted=True, promptedAt=iso(now))
    return True


def host_confirm_texts(
    proposal_ids: Sequence[str],
    proposals: Sequence[dict[str, Any]],
    notice_lines: Sequence[str],
    popup: Popup,
    workspace_names: Sequence[str] = (),
) -> tuple[str, str]:
    """``texts.confirm_texts`` worded for the host's popup (``HostAdapter.POPUP``): how to name its
    tool, and its own memory tools the model must not call instead."""
    forbidden = "、".join(("memory_propose", *popup.memory_tools))
    return confirm_texts(
        proposal_ids, proposals, notice_lines, popup.tool_wording, forbidden, workspace_names
    )


# ---------------------------------------------------------------------------------------------
# A host that shows the continuation as the user's next prompt: the model text comes back on it
# ---------------------------------------------------------------------------------------------


def confirm_pair_path(paths: DataPaths, host: str, session_key: str) -> Path:
    return paths.side_dir / f"confirm-{host}-{session_key}.json"


def save_confirm_pair(paths: DataPaths, host: str, session_key: str, user_text: str, model_text: str) -> None:
    jobs.ensure_side_dir(paths)
    pair: dict[str, str] = {"userText": user_text, "modelText": model_text}
    secret = read_session_secret(paths)
    if secret is not None:  # without it the pair is not trusted, and the text is rebuilt
        pair[seal.MAC_FIELD] = seal.pair_mac(host, session_key, user_text, model_text, secret)
    write_atomic(
        confirm_pair_path(paths, host, session_key), json.dumps(pair, ensure_ascii=False) + "\n", mode=0o600
    )


def _sealed_pair(paths: DataPaths, host: str, session_key: str, saved: object) -> str | None:
    """The saved model text if the plugin wrote this pair for this host and session."""
    if not isinstance(saved, dict):
        return None
    user_text, model_text = saved.get("userText"), saved.get("modelText")
    mac, secret = saved.get(seal.MAC_FIELD), read_session_secret(paths)
    if not isinstance(user_text, str) or not isinstance(model_text, str):
        return None
    if (
        not isinstance(mac, str)
        or secret is None
        or not hmac.compare_digest(mac, seal.pair_mac(host, session_key, user_text, model_text, secret))
    ):
        log(paths, "side-confirm-pair-seal-invalid", agent=host)
        return None
    return model_text


def restore_continuation_prompt(paths: DataPaths, host: str, session_key: str, prompt: str) -> str | None:
    """The model text for a prompt that is our own Stop continuation, or ``None`` if it is not.

    Looked up per host and session, so one session can never see another's sessionIDs. With no
    saved pair (deleted, another machine), the result lines are rebuilt from the prompt itself.
    """
    text = prompt.replace("\r\n", "\n").strip()
    if not text.startswith(NOTICE_HEADER):
        return None
    if session_key:
        path = confirm_pair_path(paths, host, session_key)
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            saved = None
        if isinstance(saved, dict) and str(saved.get("userText", "")).strip() == text:
            with contextlib.suppress(OSError):
                os.unlink(path)
            model_text = _sealed_pair(paths, host, session_key, saved)
            if model_text is not None:
                return model_text
    lines = _result_lines(text)
    if lines:
        return direct_texts(lines)[1]
    return STALE_CONFIRMATION


def _result_lines(text: str) -> list[str]:
    lines = text.split("\n")
    if RESULT_HEADING not in lines:
        return []
    out: list[str] = []
    for line in lines[lines.index(RESULT_HEADING) + 1 :]:
        if line == CONFIRM_HEADING:
            break
        if line.strip():
            out.append(line)
    return out
