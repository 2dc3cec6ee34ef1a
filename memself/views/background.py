"""The detached filler run that the daily maintenance starts, and its start.

Why the daily maintenance and not the idle engine: the budget is a daily one and the maintenance
runs once a day, at the first session start, already detached for a large store; the engine may
not run at all (a user without the model warm), holds the embedding model in memory while it
lives, and would keep itself alive past its idle exit for a slow endpoint. The run is a process
of its own (new session, stdio on /dev/null), so nothing on the hook path waits for a request.
Standard library only at import: the session start that triggers it stays light.
"""

from __future__ import annotations

import os
import sys
from datetime import datetime, timezone

from memself.paths import DataPaths

DELAY_ENV = "MEMSELF_VIEWS_DELAY_S"
DEFAULT_DELAY_S = 120.0
# "0" keeps the daily maintenance from starting the run: for test suites, whose short-lived judge
# servers a delayed run would otherwise reach after the test that started it has ended.
SWITCH_ENV = "MEMSELF_VIEWS_BACKGROUND"


def background_command(paths: DataPaths) -> list[str]:
    """An isolated interpreter (``memself.launcher``): nothing from the working directory (a
    repository the user has open) or from PYTHONPATH is imported."""
    from memself.launcher import python_command

    return python_command("memself.views.background", str(paths.root))


def start_background_fill(paths: DataPaths) -> int | None:
    """Spawn the run when an endpoint is configured and the day's budget is not zero; its pid."""
    from memself import children
    from memself.config import load_config
    from memself.logs import log

    if os.environ.get(SWITCH_ENV, "").strip() == "0":
        return None
    config = load_config(paths)
    if (
        not config.enabled
        or not str(config.sideApiBase or "").strip()
        or not str(config.sideApiModel or "").strip()
    ):
        return None
    if config.viewsDailyRequests <= 0 or config.viewsDailyTokens <= 0:
        return None
    from memself.platform import children as platform_children

    argv = background_command(paths)
    try:
        pid = platform_children.spawn_detached(argv, dict(os.environ))
    except OSError as exc:
        log(paths, "views-fill-start-failed", error=str(exc))
        return None
    children.track(pid)  # a warm engine reaps it; a hook process exits first and init does
    log(paths, "views-fill-started", pid=pid)
    return pid


def start_delay_s() -> float:
    """How long the run waits before its first request: the session that started it sends its
    first prompts to the same endpoint (the judge), and they come first."""
    try:
        return max(0.0, float(os.environ.get(DELAY_ENV, DEFAULT_DELAY_S)))
    except ValueError:
        return DEFAULT_DELAY_S


def main(argv: list[str]) -> int:
    """The detached run: every failure goes to the log."""
    import time

    from memself.config import load_config
    from memself.logs import log
    from memself.views.fill import run_fill

    paths = DataPaths(argv[0])
    time.sleep(start_delay_s())
    if not paths.root.is_dir():  # the data directory went away meanwhile: nothing to do
        return 0
    try:
        report = run_fill(paths, load_config(paths), lambda: datetime.now(timezone.utc))
    except Exception as exc:
        log(paths, "views-fill-failed", error=f"{type(exc).__name__}: {exc}")
        return 1
    log(
        paths,
        "views-fill-done",
        stopped=report.stopped,
        requests=report.requests,
        filled=len(report.filled),
        failed=len(report.failed),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
