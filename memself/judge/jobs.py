"""Judge job files ``side/<sessionID>.json``: exclusive creation, atomic updates, tombstones.

A job moves ``running`` -> ``ready`` (a proposal, or an applied notice) -> ``none`` (resolved,
skipped, superseded, failed). Finished jobs stay 24 h as tombstones so a retried hook with the
same sessionID never starts a second judge. Read-modify-write updates are serialised by one
kernel lock on ``side/.lock`` because the judge, Stop hooks and MCP servers update jobs concurrently.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from memself.atomic import write_atomic
from memself.judge import runlock, seal
from memself.judge.credentials import read_session_secret
from memself.judge.proposal_id import is_proposal_id
from memself.logs import log
from memself.paths import DataPaths
from memself.platform import files as platform_files
from memself.platform import locks
from memself.store.workspaces import Workspace, workspace_for_key
from memself.timeutil import iso, local_midnight, parse_iso

Job = dict[str, Any]

RUNNING = "running"
READY = "ready"
NONE = "none"

PROMPT_LIMIT = 4000
# A reason is a short code or an error's first line; an endpoint's answer never makes it longer.
REASON_LIMIT = 300
# Two 70 s judge calls plus slack: a job still running after this is dead (§4.7).
STUCK_AFTER = timedelta(seconds=155)
TOMBSTONE_TTL = timedelta(hours=24)
_SKIP_PREFIXES = ("latest-", "confirm-")


def job_path(paths: DataPaths, session_id: str) -> Path:
    return paths.side_dir / f"{session_id}.json"


def ensure_side_dir(paths: DataPaths) -> Path:
    paths.ensure()
    paths.side_dir.mkdir(mode=0o700, exist_ok=True)
    return paths.side_dir


@contextlib.contextmanager
def side_lock(paths: DataPaths) -> Iterator[None]:
    """Serialise read-modify-write of job files across processes (short critical sections only)."""
    ensure_side_dir(paths)
    fd = os.open(paths.side_dir / ".lock", os.O_RDWR | os.O_CREAT | platform_files.BINARY, 0o600)
    try:
        locks.exclusive(fd)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def new_job(
    session_id: str,
    host: str,
    session_key: str,
    turn_id: str,
    prompt: str,
    now: datetime,
    workspace: str = "",
) -> Job:
    job: Job = {
        "version": 1,
        "id": session_id,
        "status": RUNNING,
        "agent": host,  # the job file keeps the original plugin's field name
        "sessionKey": session_key,
        "generationKey": turn_id,
        "prompt": prompt[:PROMPT_LIMIT],
        "startedAt": iso(now),
        "prompted": False,
        "proposal": None,
        "reason": "",
    }
    if workspace:
        # The turn's workspace key, sealed with the job: a proposal is written into it or global,
        # never into a workspace a file names. Absent: a turn without one, as the original's jobs.
        job["workspace"] = workspace
    return job


def job_workspace(job: Job) -> Workspace | None:
    """The workspace of the turn a job judged; None for a turn without one (or a bad key)."""
    value = job.get("workspace")
    return workspace_for_key(value) if isinstance(value, str) else None


def create_job(paths: DataPaths, job: Job) -> bool:
    """Create the job file exclusively (mode 600); ``False`` if it already exists (a retry).

    The content goes to a temp file first and is hard-linked into place: ``link`` fails with
    EEXIST exactly like ``O_EXCL``, and no reader ever sees an empty or half-written job.
    """
    folder = ensure_side_dir(paths)
    target = job_path(paths, job["id"])
    payload = (json.dumps(job, ensure_ascii=False, indent=2) + "\n").encode("utf-8")
    fd, tmp = tempfile.mkstemp(prefix=".new-", suffix=".tmp", dir=folder)
    try:
        # No fsync: this runs inside the prompt hook's budget, and a job lost in a crash only
        # means a retried hook may judge that prompt again.
        os.write(fd, payload)
        os.close(fd)
        fd = -1
        os.chmod(tmp, 0o600)
        try:
            os.link(tmp, target)
        except FileExistsError:
            return False
        except OSError:
            # Filesystems without hard links: plain O_EXCL create, still exclusive.
            return _create_excl(target, payload)
        return True
    finally:
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def _create_excl(target: Path, payload: bytes) -> bool:
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | platform_files.BINARY, 0o600)
    except FileExistsError:
        return False
    try:
        os.write(fd, payload)
    finally:
        os.close(fd)
    return True


def read_job(path: Path) -> Job | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    # A job copied under another file name is not a job: one id, one file.
    if not isinstance(data, dict) or not is_proposal_id(data.get("id")) or data["id"] != path.stem:
        return None
    return data


def load_job(paths: DataPaths, session_id: str) -> Job | None:
    if not is_proposal_id(session_id):
        return None
    return read_job(job_path(paths, session_id))


def save_job(paths: DataPaths, job: Job) -> None:
    write_atomic(job_path(paths, job["id"]), json.dumps(job, ensure_ascii=False, indent=2) + "\n", mode=0o600)


def update_job(
    paths: DataPaths, session_id: str, change: Callable[[Job], bool], *, trusted_only: bool = False
) -> Job | None:
    """Under the side lock: read the job, let ``change`` mutate it, save if it returns True.

    Returns the job as saved, or ``None`` when it is missing, ``change`` declined, or
    ``trusted_only`` is set and the job is not one the plugin sealed.
    """
    with side_lock(paths):
        job = load_job(paths, session_id)
        if job is None:
            return None
        # Only a job the plugin sealed is sealed again: an update never launders a forged file.
        secret = read_session_secret(paths)
        authentic = seal.check_job(job, secret, session_id) == ""
        if (trusted_only and not authentic) or not change(job):
            return None
        if authentic and secret is not None:
            seal.seal_job(job, secret)
        else:
            job.pop(seal.MAC_FIELD, None)
        save_job(paths, job)
        return job


def untrusted(paths: DataPaths, job: Job, where: str) -> bool:
    """True, and logged, when ``job`` is not exactly what the plugin sealed: invented, edited,
    re-armed or copied. Such a job is never applied or shown."""
    problem = seal.check_job(job, read_session_secret(paths), str(job.get("id")))
    if problem:
        log(paths, "side-job-seal-invalid", id=job.get("id"), reason=problem, at=where)
    return bool(problem)


def finish(
    paths: DataPaths,
    session_id: str,
    now: datetime,
    status: str,
    reason: str = "",
    *,
    force: bool = False,
    **fields: object,
) -> Job | None:
    """End or advance a job. Without ``force`` only a running, unprompted job is touched (§4.8).

    The judge finishes without force, so a job that Stop already timed out or superseded is never
    overwritten by a late judge; Stop, resolve and cleanup finish with force.
    """

    def change(job: Job) -> bool:
        if not force and (job.get("status") != RUNNING or job.get("prompted")):
            return False
        job.update(fields)
        job["status"] = status
        job["reason"] = " ".join(reason.split())[:REASON_LIMIT]
        job["finishedAt"] = iso(now)
        return True

    return update_job(paths, session_id, change)


def _started(job: Job) -> datetime | None:
    return parse_iso(job.get("startedAt"))


def is_finished(job: Job) -> bool:
    """A tombstone: nothing left to show or resolve (``none``, or applied and already shown)."""
    status = job.get("status")
    return status == NONE or (bool(job.get("applied")) and bool(job.get("prompted")))


def _job_files(paths: DataPaths, now: datetime) -> list[Path]:
    try:
        names = sorted(os.listdir(paths.side_dir))
    except OSError:
        return []
    for name in names:
        # Confirm pairs (the model text behind a continuation the host shows) serve the next prompt only.
        stale = name.startswith("confirm-") or (
            # A run lock whose job was never created (the disk filled up in between).
            name.endswith(runlock.SUFFIX) and name[: -len(runlock.SUFFIX)] + ".json" not in names
        )
        if stale and _mtime_older(paths.side_dir / name, now, TOMBSTONE_TTL):
            with contextlib.suppress(OSError):
                (paths.side_dir / name).unlink()
    return [paths.side_dir / n for n in names if n.endswith(".json") and not n.startswith(_SKIP_PREFIXES)]


def list_jobs(paths: DataPaths, now: datetime) -> list[Job]:
    """Every job, oldest first; finished jobs older than 24 h are deleted on the way."""
    jobs: list[Job] = []
    expired: list[Path] = []
    for path in _job_files(paths, now):
        job = read_job(path)
        if job is None:
            if _mtime_older(path, now, TOMBSTONE_TTL):
                expired.append(path)
            continue
        if is_finished(job):
            ended = parse_iso(job.get("finishedAt")) or _started(job)
            if ended is None or now - ended > TOMBSTONE_TTL:
                expired.append(path)
                continue
        jobs.append(job)
    if expired:
        _delete_expired(paths, expired, now)
    jobs.sort(key=lambda j: (str(j.get("startedAt", "")), str(j.get("id", ""))))
    return jobs


def _delete_expired(paths: DataPaths, candidates: list[Path], now: datetime) -> None:
    with side_lock(paths):
        for path in candidates:
            job = read_job(path)  # re-check under the lock: it may have changed meanwhile
            if job is not None:
                ended = parse_iso(job.get("finishedAt")) or _started(job)
                if not is_finished(job) or (ended is not None and now - ended <= TOMBSTONE_TTL):
                    continue
            with contextlib.suppress(OSError):
                path.unlink()
            with contextlib.suppress(OSError):
                path.with_suffix(runlock.SUFFIX).unlink()  # the judge has long exited


def _mtime_older(path: Path, now: datetime, age: timedelta) -> bool:
    try:
        return now.timestamp() - path.stat().st_mtime > age.total_seconds()
    except OSError:
        return False


def session_jobs(paths: DataPaths, host: str, session_key: str, now: datetime) -> list[Job]:
    """Jobs of exactly this host and this session; other sessions' jobs are never returned."""
    return [j for j in list_jobs(paths, now) if j.get("agent") == host and j.get("sessionKey") == session_key]


def expire_stuck(paths: DataPaths, jobs: list[Job], now: datetime) -> list[str]:
    """Finish running jobs older than 155 s as ``judge-timeout``; returns their ids."""
    expired: list[str] = []
    for job in jobs:
        started = _started(job)
        if job.get("status") == RUNNING and (started is None or now - started > STUCK_AFTER):
            if finish(paths, job["id"], now, NONE, "judge-timeout") is not None:
                expired.append(job["id"])
    return expired


def cleanup_zombies(paths: DataPaths, now: datetime) -> int:
    """Daily maintenance (§4.8): proposals prompted before today's local midnight and never
    answered become ``none`` / ``daily-zombie-cleanup``. Returns how many were cleaned.

    Jobs prompted today and jobs never prompted are left alone.
    """
    midnight = local_midnight(now)
    cleaned = 0
    for job in list_jobs(paths, now):
        if job.get("status") != READY or not job.get("prompted") or job.get("applied"):
            continue
        when = parse_iso(job.get("promptedAt")) or parse_iso(job.get("finishedAt")) or _started(job)
        if when is None or when >= midnight:
            continue

        def change(current: Job) -> bool:
            return (
                current.get("status") == READY
                and bool(current.get("prompted"))
                and not current.get("applied")
            )

        done = update_job(paths, job["id"], lambda j: change(j) and _set_none(j, now, "daily-zombie-cleanup"))
        if done is not None:
            cleaned += 1
    # Proposals whose session never answered again stay unprompted; the log says how many.
    log(
        paths,
        "side-zombie-cleanup",
        cleaned=cleaned,
        unprompted_earlier=count_unprompted_before_today(paths, now),
    )
    return cleaned


def _set_none(job: Job, now: datetime, reason: str) -> bool:
    job["status"] = NONE
    job["reason"] = reason
    job["finishedAt"] = iso(now)
    return True


def count_unprompted_before_today(paths: DataPaths, now: datetime) -> int:
    """Ready proposals from earlier days never shown (their session never answered again)."""
    midnight = local_midnight(now)
    count = 0
    for job in list_jobs(paths, now):
        if job.get("status") == READY and not job.get("prompted") and not job.get("applied"):
            when = parse_iso(job.get("finishedAt")) or _started(job)
            if when is not None and when < midnight:
                count += 1
    return count
