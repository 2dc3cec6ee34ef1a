"""The host-neutral core of the hooks: a ``HookEvent`` in, a ``HookReply`` out.

Session start: daily maintenance, warm the engine, inject the rules (no model needed).
Prompt submit: input filter, start the judge, recall through the warm engine, inject.
Stop: hand over the judge's results or its confirmation request.

Standard library only: the hook runs under ``python -I -S`` and must answer in milliseconds.
Every failure inside is logged and degrades to a smaller answer, never to an error.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from memself.config import Config, load_config
from memself.errors import MemselfError
from memself.hook import deadline
from memself.hosts.base import EventKind, HookEvent, HookReply, HostAdapter
from memself.logs import log
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from memself.store.records import GROUPS, Memory
from memself.text import messages as texts
from memself.text.input_filter import (
    SKIP_EMPTY,
    SKIP_PLUGIN_CONTINUATION,
    SKIP_PLUGIN_NOTICE,
    SKIP_QUESTION_ANSWER,
    SKIP_STOP_HOOK,
    classify_input,
)
from memself.text.private import strip_private

# Our own continuations and notices, and answers to our popup: no recall, no judge, no reminder.
_PLUGIN_TRAFFIC = {
    SKIP_EMPTY,
    SKIP_PLUGIN_CONTINUATION,
    SKIP_PLUGIN_NOTICE,
    SKIP_QUESTION_ANSWER,
    SKIP_STOP_HOOK,
}
# How long the prompt hook waits for the warm engine's recall; hosts allow the hook 5 s or more.
# Less when the hook process's deadline leaves less than the reserve after it.
RECALL_BUDGET_S = 1.0
RECALL_RESERVE_S = 0.5


# (prompt text, now, workspace key): global memories and that workspace's ("" for global only).
RecallFn = Callable[[str, datetime, str], "dict[str, Any] | None"]


def handle(
    event: HookEvent,
    now: datetime,
    paths: DataPaths,
    *,
    recall: RecallFn | None = None,
    in_engine: bool = False,
    store: MemoryStore | None = None,
) -> HookReply:
    """Answer one event. ``recall`` defaults to asking the warm engine; inside the engine it is
    the engine's own recall, and the engine does not need warming. ``store``: the engine's store,
    whose reads are cached between hooks."""
    config = load_config(paths)
    if not config.enabled:
        return HookReply()
    if event.kind is EventKind.SESSION_START:
        return session_start(event, config, now, paths, warm=not in_engine, store=store)
    if event.kind is EventKind.PROMPT_SUBMIT:
        return prompt_submit(event, config, now, paths, recall or _engine_recall(paths))
    if event.kind is EventKind.STOP:
        return stop(event, config, now, paths)
    return HookReply()


def _adapter(event: HookEvent) -> HostAdapter:
    from memself.hosts import HOSTS

    return HOSTS[event.host]


def deposition_state(paths: DataPaths, config: Config) -> str:
    """ "on" when the judge can run, else why not (``memself.judge.start.deposition_status``)."""
    from memself.judge.start import deposition_status

    return deposition_status(paths, config)


def session_start(
    event: HookEvent,
    config: Config,
    now: datetime,
    paths: DataPaths,
    warm: bool = True,
    store: MemoryStore | None = None,
) -> HookReply:
    from memself.maintenance import run_or_start_daily_maintenance

    try:
        # A large store's maintenance runs detached: the session never waits past its deadline.
        run_or_start_daily_maintenance(paths, config.decayDays, now, deadline.budget(1.0, 1.0))
    except (MemselfError, OSError) as exc:
        log(paths, "daily-maintenance-failed", error=str(exc))
    if warm:
        _warm_engine(paths, config)
    _start_sync(paths, now, event.workspace)
    adapter = _adapter(event)
    # The global rules and the workspace's own; another workspace's are never injected.
    rules = [m for m in (store or MemoryStore(paths)).active("rule") if m.visible_in(event.workspace)]
    text = texts.session_start(
        rules,
        adapter.OWN_MEMORY,
        deposition_state(paths, config),
        adapter.CONTEXT_LIMIT,
        team_rules=_team_rules(event.workspace, paths),
    )
    return HookReply(context=text)


def _team_rules(workspace: str, paths: DataPaths) -> list[Memory]:
    """The rules the turn's repository carries for its team (read-only, this workspace only)."""
    from memself.store.team import team_memories

    def report(event: str, **fields: object) -> None:
        log(paths, event, **fields)

    try:
        return team_memories(workspace, "rule", report)
    except (MemselfError, OSError) as exc:
        log(paths, "team-rules-failed", error=str(exc))
        return []


def _start_sync(paths: DataPaths, now: datetime, workspace: str) -> None:
    """``memself sync`` set up: start it detached (the session never waits for git)."""
    try:
        from memself.sync.background import start_if_due

        start_if_due(paths, now, workspace)
    except Exception as exc:
        log(paths, "sync-start-failed", error=type(exc).__name__)


def _warm_engine(paths: DataPaths, config: Config) -> None:
    try:
        from memself.engine.client import ensure_started

        ensure_started(paths, idle_minutes=config.engineIdleMinutes)
    except Exception as exc:
        log(paths, "engine-start-failed", error=type(exc).__name__)


def prompt_submit(
    event: HookEvent, config: Config, now: datetime, paths: DataPaths, recall: RecallFn
) -> HookReply:
    # Private spans go first: nothing below (recall, the judge, its job file) ever sees them.
    event = event._replace(prompt=strip_private(event.prompt))
    adapter = _adapter(event)
    restored = _restore_hidden_confirmation(event, paths)
    if restored is not None:
        return HookReply(context=restored)
    verdict = classify_input(event.prompt)
    if verdict.skip_reason in _PLUGIN_TRAFFIC:
        return HookReply()
    notice = _broken_notice(event, paths)
    from memself.judge.start import LEARNING

    deposition = deposition_state(paths, config)
    if deposition in LEARNING and not verdict.skipped:
        _start_judge(event, config, now, paths)
    block = ""
    recalled: tuple[str, ...] = ()
    if not verdict.skipped:
        block, recalled, model_notice = _recall_block(
            recall, verdict.recall_text, now, event.workspace, paths
        )
        notice = "\n\n".join(p for p in (notice, model_notice) if p)
    reminder = texts.reminder(adapter.OWN_MEMORY, deposition)
    context = "\n\n".join(p for p in (notice, block, reminder) if p)
    user_message = "\n\n".join(p for p in (notice, block if config.showRecall else "") if p)
    return HookReply(context=context, user_message=user_message, rewards=recalled)


def _broken_notice(event: HookEvent, paths: DataPaths) -> str:
    """The one line naming the rules the session's previous answer broke, once."""
    from memself.kept.turns import take_notice

    try:
        return texts.broken_notice(take_notice(paths, event.host, event.session_key))
    except (MemselfError, OSError) as exc:
        log(paths, "kept-notice-failed", error=str(exc))
        return ""


def _restore_hidden_confirmation(event: HookEvent, paths: DataPaths) -> str | None:
    """A host that shows a Stop continuation as the user's next prompt: the model's instruction
    comes back from a file."""
    from memself.judge.followup import restore_continuation_prompt

    try:
        return restore_continuation_prompt(paths, event.host, event.session_key, event.prompt)
    except (MemselfError, OSError) as exc:
        log(paths, "restore-confirmation-failed", error=str(exc))
        return None


def _start_judge(event: HookEvent, config: Config, now: datetime, paths: DataPaths) -> None:
    from memself.judge.start import maybe_start_judge

    try:
        maybe_start_judge(
            paths,
            config,
            event.host,
            event.session_key,
            event.turn_id,
            event.prompt,
            now,
            workspace=event.workspace,
        )
    except (MemselfError, OSError) as exc:
        log(paths, "judge-start-failed", error=str(exc))


def _engine_recall(paths: DataPaths) -> RecallFn:
    def recall(text: str, now: datetime, workspace: str) -> dict[str, Any] | None:
        from memself.engine.client import recall_or_none

        budget = deadline.budget(RECALL_BUDGET_S, RECALL_RESERVE_S)
        if budget <= 0:
            return None  # the hook's deadline is near: answer without recall
        options = {"now": now.isoformat(), "workspace": workspace}
        return recall_or_none(paths, text, budget, options=options)

    return recall


def _recall_block(
    recall: RecallFn, text: str, now: datetime, workspace: str, paths: DataPaths
) -> tuple[str, tuple[str, ...], str]:
    """The recall block for ``text`` in ``workspace``, the ids of the memories in it, and the
    notice of an engine that could not load the configured model. Nothing is rewarded here: the
    hook rewards them once the block has reached the host (``memself.hook.run``)."""
    try:
        result = recall(text, now, workspace)
    except (MemselfError, OSError) as exc:
        log(paths, "recall-failed", error=str(exc))
        return "", (), ""
    if not result:
        return "", (), ""
    problem = result.get("model_problem")
    notice = (
        texts.model_notice(str(problem.get("wanted", "")), str(problem.get("serving", "")))
        if isinstance(problem, dict)
        else ""
    )
    found = {group: list(result.get(group, [])) for group in GROUPS}
    hits = {
        group: [texts.RecallHit(_shown(h), float(h["score"]), float(h["confidence"])) for h in items]
        for group, items in found.items()
    }
    block = texts.recall_block(hits["rule"], hits["project"])
    if not block:
        return "", (), notice
    ids = tuple(dict.fromkeys(str(h["id"]) for items in found.values() for h in items if "id" in h))
    return block, ids, notice


def _shown(hit: dict[str, Any]) -> str:
    """A hit's text, marked when the repository carries it for its team."""
    from memself.store.team import ID_PREFIX

    text = str(hit["text"])
    return texts.TEAM_MARK + text if str(hit.get("id", "")).startswith(ID_PREFIX) else text


def stop(event: HookEvent, config: Config, now: datetime, paths: DataPaths) -> HookReply:
    if event.stop_active or not event.session_key:
        return HookReply()
    _start_check(event, config, now, paths)
    from memself.judge.followup import take_followup

    adapter = _adapter(event)
    try:
        # The wait for judge jobs ends in time for the rest of Stop to answer before the hook
        # process's deadline, whatever sideWaitMs says.
        result = take_followup(
            paths,
            config,
            event.host,
            event.session_key,
            adapter.POPUP,
            now,
            max_wait_s=deadline.remaining(deadline.STOP_RESERVE_S),
        )
    except (MemselfError, OSError) as exc:
        log(paths, "followup-failed", error=str(exc))
        return HookReply()
    if not result:
        return HookReply()
    visible, model_text = result
    return HookReply(continuation=model_text, visible=visible)


def _start_check(event: HookEvent, config: Config, now: datetime, paths: DataPaths) -> None:
    """Hand the turn's answer to the detached check of rules kept and facts used."""
    from memself.judge.start import deposition_configured
    from memself.kept.start import maybe_start_check

    def rules() -> int:
        return sum(1 for m in MemoryStore(paths).active("rule") if m.visible_in(event.workspace))

    try:
        maybe_start_check(paths, event, now, rules, lambda: deposition_configured(paths, config))
    except (MemselfError, OSError) as exc:
        log(paths, "kept-start-failed", error=str(exc))
