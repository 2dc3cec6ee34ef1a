"""Start a judge job from the prompt hook: decide, create the job exclusively, spawn, return.

On the hook path: standard library only, and the spawn costs the hook a few milliseconds. The raw
prompt never persists or leaves the machine; only its redacted form is stored in the job. The
sessionID still hashes the raw normalised prompt so that a retried hook maps to the same id.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from memself import children
from memself.config import Config
from memself.errors import MemselfError
from memself.judge import jobs, runlock, seal
from memself.judge.credentials import (
    ensure_session_secret,
    key_state,
    load_or_create_session_secret,
    read_key_file,
)
from memself.judge.proposal_id import prompt_hash
from memself.judge.proposal_id import proposal_id as make_proposal_id
from memself.launcher import python_command
from memself.logs import log
from memself.paths import DataPaths
from memself.platform import children as platform_children
from memself.platform import locks
from memself.text.input_filter import prepare_for_judge
from memself.text.private import strip_private

# (job file, run-lock descriptor): the spawned judge must hold that descriptor while it runs.
Spawner = Callable[[Path, int], object]
NO_SESSION_MESSAGE = "旁路分析缺少稳定会话 ID，已跳过"
LEARNING = ("on", "repaired")  # the deposition states in which the judge runs


def deposition_status(paths: DataPaths, config: Config) -> str:
    """What the hooks tell the model about learning (§4.1), one of:

    "on"; "repaired" (on, and an invalid ``session-secret`` was just set aside and replaced:
    say so once); "off" (disabled or the API triple incomplete); "legacy" (the removed blocking
    mode); "key-invalid" (``side-secret.json`` exists but is unusable); "paused-endpoint" (the
    configured endpoint is not the one the key was entered for: nothing is sent until the user
    enters the key again); "paused-unconfirmed" (a key in the original's format, whose endpoint
    the user has not confirmed yet: nothing is sent until they do); "secret-broken" (no valid
    ``session-secret`` can be written, e.g. a full disk).
    """
    if not config.enabled:
        return "off"
    if config.side_judge is False:  # the removed blocking mode
        return "legacy"
    base = str(config.sideApiBase or "").strip()
    if not base or not str(config.sideApiModel or "").strip():
        return "off"
    state = key_state(read_key_file(paths), base)
    if state == "missing":
        return "off"
    if state == "invalid":
        return "key-invalid"
    if state == "mismatch":
        return "paused-endpoint"
    if state == "unbound":
        return "paused-unconfirmed"
    try:
        _, set_aside = ensure_session_secret(paths)
    except (MemselfError, OSError) as exc:
        log(paths, "session-secret-unavailable", error=str(exc))
        return "secret-broken"
    return "repaired" if set_aside is not None else "on"


def deposition_configured(paths: DataPaths, config: Config) -> bool:
    """Enabled, not the legacy blocking mode, the API triple complete and the key usable for the
    configured endpoint."""
    return deposition_status(paths, config) in LEARNING


def judge_command(job_file: Path) -> list[str]:
    """The detached judge: an isolated interpreter with site (``memself.launcher``), so httpx is
    found although the hook itself runs under ``python -I -S``, and nothing in the project it
    starts in (its working directory) or on ``PYTHONPATH`` is imported."""
    return python_command("memself", "side-run", str(job_file))


def spawn_judge(job_file: Path, run_lock: int | None = None) -> int:
    """Start the judge in its own session with stdio on /dev/null, so it outlives the hook and
    its host; returns its pid.

    ``os.posix_spawn`` keeps ``subprocess`` (and the threading, signal and selectors modules it
    pulls in) out of the hook process. Descriptors Python opened are non-inheritable, so only
    the three standard ones reach the child, and those point at /dev/null, plus ``run_lock``
    (the job's locked run-lock file) as fd ``runlock.RUN_LOCK_FD``, which the judge holds until
    it exits.
    """
    env = dict(os.environ)
    env["MEMORY_SIDE_JUDGE"] = "1"
    argv = judge_command(job_file)
    if not platform_children.posix_spawn_detached():
        # Where locks are not inherited the judge takes its own (runlock.hold_as_judge).
        keep = (run_lock,) if run_lock is not None and locks.inherited() else ()
        pid = platform_children.adopt(platform_children.popen_detached_child(argv, env, keep))
        children.track(pid)  # as below: the engine waits for it
        return pid
    actions: list[tuple] = []
    source = -1
    if run_lock is not None:
        # A dup2 onto the same number may keep close-on-exec; first, so that a lock descriptor
        # numbered 0-2 (a host that closed our stdio) is moved before /dev/null replaces it.
        source = os.dup(run_lock) if run_lock == runlock.RUN_LOCK_FD else run_lock
        actions.append((os.POSIX_SPAWN_DUP2, source, runlock.RUN_LOCK_FD))
    actions += [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
        (os.POSIX_SPAWN_DUP2, 1, 2),
    ]
    try:
        pid = os.posix_spawn(argv[0], argv, env, file_actions=actions, setsid=True)
    finally:
        if source >= 0 and source != run_lock:
            os.close(source)
    children.track(pid)  # the engine waits for it; a hook process exits first
    return pid


def maybe_start_judge(
    paths: DataPaths,
    config: Config,
    host: str,
    session_key: str,
    turn_id: str,
    prompt: str,
    now: datetime,
    spawn: Spawner | None = None,
    workspace: str = "",
) -> str | None:
    """Start (at most once per sessionID) a detached judge for this prompt; return the sessionID.

    Returns ``None`` when no job exists for this prompt: deposition not configured, the prompt is
    not the user's own words or has nothing sendable after redaction, or there is no stable
    session key (fail closed: an empty key would mix sessions). A retried hook gets the same id
    and starts nothing. ``workspace`` (the turn's key, "" for none) is sealed into the job: what
    the judge finds is written into it or made global, and its dedup only sees what it sees.
    ``<private>`` spans are cut before anything else (``memself.text.private``).
    """
    if not deposition_configured(paths, config):
        return None
    # Before the text and its hash go into the job file, whoever the caller is.
    prompt = strip_private(prompt)
    safe_prompt = prepare_for_judge(prompt)
    if not safe_prompt:
        return None
    if not session_key:
        log(paths, NO_SESSION_MESSAGE, agent=host)
        return None
    secret = load_or_create_session_secret(paths)
    sid = make_proposal_id(host, session_key, turn_id, prompt, secret)
    jobs.ensure_side_dir(paths)
    # Locked before the job exists, so Stop never sees a running job that nobody holds.
    run_lock = runlock.take(paths, sid)
    if run_lock is None:
        return sid  # a retry while this job's hook or judge is still running
    try:
        job = jobs.new_job(sid, host, session_key, turn_id, safe_prompt, now, workspace)
        seal.bind_prompt(job, prompt_hash(prompt), secret)
        if not jobs.create_job(paths, job):
            return sid  # a retry or a tombstone: the judge already ran or is running
        try:
            (spawn or spawn_judge)(jobs.job_path(paths, sid), run_lock)
        except OSError as exc:
            jobs.finish(paths, sid, now, jobs.NONE, f"spawn-failed: {exc.strerror or exc}")
            log(paths, "side-spawn-failed", id=sid, error=str(exc))
            return None
    finally:
        os.close(run_lock)  # the judge's copy keeps the lock
    log(paths, "side-job-started", id=sid, agent=host)
    return sid
