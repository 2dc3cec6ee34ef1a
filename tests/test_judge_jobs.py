"""Job files: exclusive create, finish semantics, tombstones, stuck jobs, zombies (checklist 29)."""

from __future__ import annotations

import json
import os
import stat
import threading
from datetime import datetime, timedelta, timezone

from memself.judge import jobs
from memself.paths import DataPaths
from memself.timeutil import iso, local_midnight

NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)


def sid(n: int) -> str:
    return "s_" + f"{n:064x}"


def make(paths: DataPaths, n: int, now: datetime = NOW, host: str = "claude", session: str = "k1") -> str:
    job = jobs.new_job(sid(n), host, session, "t", "用户原话" * 2000, now)
    assert jobs.create_job(paths, job)
    return job["id"]


def test_create_is_exclusive_with_fields_and_mode() -> None:
    paths = DataPaths.default()
    job_id = make(paths, 1)
    path = jobs.job_path(paths, job_id)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    data = json.loads(path.read_text())
    assert data["version"] == 1 and data["status"] == "running" and data["prompted"] is False
    assert data["proposal"] is None and data["reason"] == "" and data["generationKey"] == "t"
    assert len(data["prompt"]) == 4000 and data["startedAt"] == iso(NOW)
    again = jobs.new_job(job_id, "claude", "k1", "t", "other", NOW)
    assert jobs.create_job(paths, again) is False
    assert json.loads(path.read_text())["prompt"] == data["prompt"]
    assert [p.name for p in paths.side_dir.iterdir() if not p.name.startswith(".")] == [path.name]


def test_concurrent_create_one_winner() -> None:
    paths = DataPaths.default()
    wins: list[bool] = []
    barrier = threading.Barrier(10)

    def worker() -> None:
        barrier.wait()
        wins.append(jobs.create_job(paths, jobs.new_job(sid(7), "a", "k", "", "p", NOW)))

    threads = [threading.Thread(target=worker) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wins.count(True) == 1 and len(wins) == 10
    assert not [p for p in paths.side_dir.iterdir() if p.name.endswith(".tmp")]


def test_finish_without_force_only_touches_running_unprompted() -> None:
    paths = DataPaths.default()
    a = make(paths, 1)
    assert jobs.finish(paths, a, NOW, "ready", proposal={"text": "x"}) is not None
    assert jobs.finish(paths, a, NOW, "none", "late") is None  # no longer running
    assert jobs.load_job(paths, a)["status"] == "ready"
    assert jobs.finish(paths, a, NOW, "none", "user-skip", force=True)["reason"] == "user-skip"
    b = make(paths, 2)
    jobs.update_job(paths, b, lambda j: j.update(prompted=True) is None)
    assert jobs.finish(paths, b, NOW, "none", "x") is None


def test_listing_skips_foreign_names_and_expires_tombstones() -> None:
    paths = DataPaths.default()
    old = NOW - timedelta(hours=25)
    dead = make(paths, 1, old)
    jobs.finish(paths, dead, old, "none", "not-memory")
    fresh_dead = make(paths, 2, NOW - timedelta(hours=23))
    jobs.finish(paths, fresh_dead, NOW - timedelta(hours=23), "none", "not-memory")
    pending = make(paths, 3, old)  # an unanswered proposal is kept whatever its age
    jobs.finish(paths, pending, old, "ready", proposal={"text": "x"})
    notice = make(paths, 4, old)  # applied but notice not shown yet: kept
    jobs.finish(paths, notice, old, "ready", applied=True, notice="n")
    shown = make(paths, 5, old)
    jobs.finish(paths, shown, old, "ready", applied=True, notice="n", prompted=True)
    (paths.side_dir / "confirm-cursor-k1.json").write_text("{}")
    (paths.side_dir / "latest-cursor.json").write_text("{}")
    (paths.side_dir / "notes.txt").write_text("x")
    ids = {j["id"] for j in jobs.list_jobs(paths, NOW)}
    assert ids == {fresh_dead, pending, notice}
    assert not jobs.job_path(paths, dead).exists() and not jobs.job_path(paths, shown).exists()
    assert (paths.side_dir / "confirm-cursor-k1.json").exists()
    assert (paths.side_dir / "notes.txt").exists()


def test_run_locks_go_with_their_jobs() -> None:
    paths = DataPaths.default()
    old = NOW - timedelta(hours=25)
    dead, kept = make(paths, 1, old), make(paths, 2, NOW)
    jobs.finish(paths, dead, old, "none", "not-memory")
    for job_id in (dead, kept, sid(3)):  # sid(3): its job was never created
        (paths.side_dir / f"{job_id}.run").touch()
    stale = old.timestamp()
    os.utime(paths.side_dir / f"{sid(3)}.run", (stale, stale))
    assert {j["id"] for j in jobs.list_jobs(paths, NOW)} == {kept}
    assert sorted(p.name for p in paths.side_dir.glob("*.run")) == [f"{kept}.run"]


def test_session_jobs_isolated() -> None:
    paths = DataPaths.default()
    a = make(paths, 1, host="claude", session="k1")
    make(paths, 2, host="claude", session="k2")
    make(paths, 3, host="codebuddy", session="k1")
    assert [j["id"] for j in jobs.session_jobs(paths, "claude", "k1", NOW)] == [a]


def test_stuck_after_155_seconds() -> None:
    paths = DataPaths.default()
    a = make(paths, 1, NOW - timedelta(seconds=156))
    b = make(paths, 2, NOW - timedelta(seconds=150))
    expired = jobs.expire_stuck(paths, jobs.list_jobs(paths, NOW), NOW)
    assert expired == [a]
    assert jobs.load_job(paths, a)["reason"] == "judge-timeout"
    assert jobs.load_job(paths, b)["status"] == "running"


def test_zombie_cleanup_checklist_29() -> None:
    paths = DataPaths.default()
    midnight = local_midnight(NOW)
    yesterday = midnight - timedelta(hours=3)
    z = make(paths, 1, yesterday)
    jobs.finish(paths, z, yesterday, "ready", proposal={"text": "x"})
    jobs.update_job(paths, z, lambda j: j.update(prompted=True, promptedAt=iso(yesterday)) is None)
    today = make(paths, 2, yesterday)
    jobs.finish(paths, today, yesterday, "ready", proposal={"text": "x"})
    jobs.update_job(
        paths,
        today,
        lambda j: j.update(prompted=True, promptedAt=iso(midnight + timedelta(minutes=1))) is None,
    )
    never = make(paths, 3, yesterday)
    jobs.finish(paths, never, yesterday, "ready", proposal={"text": "x"})
    now = max(NOW, midnight + timedelta(hours=1))
    assert jobs.count_unprompted_before_today(paths, now) == 1
    assert jobs.cleanup_zombies(paths, now) == 1
    assert '"cleaned": 1, "unprompted_earlier": 1' in paths.log_file.read_text()
    assert jobs.load_job(paths, z)["status"] == "none"
    assert jobs.load_job(paths, z)["reason"] == "daily-zombie-cleanup"
    assert jobs.load_job(paths, today)["status"] == "ready"
    assert jobs.load_job(paths, never)["status"] == "ready"
    # A zombie created after today's scan is cleaned the next day, not today.
    late = make(paths, 4, now)
    jobs.finish(paths, late, now, "ready", proposal={"text": "x"})
    jobs.update_job(paths, late, lambda j: j.update(prompted=True, promptedAt=iso(now)) is None)
    assert jobs.cleanup_zombies(paths, now + timedelta(minutes=5)) == 0
    assert jobs.cleanup_zombies(paths, now + timedelta(days=1)) == 2  # `today` and `late`
    assert jobs.load_job(paths, late)["reason"] == "daily-zombie-cleanup"


def test_unreadable_job_file_skipped_then_expired() -> None:
    paths = DataPaths.default()
    jobs.ensure_side_dir(paths)
    bad = paths.side_dir / (sid(9) + ".json")
    bad.write_text("{half")
    assert jobs.list_jobs(paths, NOW) == []
    assert bad.exists()
    old = NOW.timestamp() - 25 * 3600
    os.utime(bad, (old, old))
    jobs.list_jobs(paths, NOW)
    assert not bad.exists()
