"""The detached check of one turn's answer, started by Stop (``memself.kept.start``).

Rules: when the judge can run and today's budget allows, one request carries the rules in force
for the turn (the global ones and the turn's workspace's, as the session start injects them) and
the bounded, redacted answer; the judge names the rules the answer clearly broke
(``memself.kept.verdict``). Facts: each project fact recalled into the turn is decided used or
not here, with no request (``memself.kept.used``, similarity through the warm engine).

Then, with nothing of the answer kept: the counts on the memories, the turn in the ledger, and
for broken rules a notice for the session's next prompt. Every failure ends in a log line.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from memself.config import Config, load_config
from memself.kept import counts as fields
from memself.kept import ledger
from memself.kept.turns import leave_notice
from memself.kept.used import SimilarityFn, used_facts
from memself.kept.verdict import CHECK_SYSTEM, check_user_message, parse_verdict
from memself.logs import log
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from memself.text.messages import SESSION_RULE_LIMIT

ChatFn = Callable[[str, str], str]  # (system, user) -> the judge's text
CHECK_TIMEOUT_S = 70.0
# A check reads the hand-off at most this large: the Stop hook wrote it bounded already.
MAX_HANDOFF_BYTES = 1 << 16


@dataclass
class CheckResult:
    broken: list[str] = field(default_factory=list)
    shown_facts: list[str] = field(default_factory=list)
    used_facts: list[str] = field(default_factory=list)
    rules_checked: int = 0
    problem: str = ""  # why the judge's answer was ignored, or why no request was sent


def read_handoff(handoff: Path) -> dict[str, Any] | None:
    """The hand-off's content, and the file gone: the answer does not stay on disk."""
    try:
        with open(handoff, encoding="utf-8") as f:
            raw = f.read(MAX_HANDOFF_BYTES)
    except OSError:
        return None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(handoff)
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _str(data: dict[str, Any], key: str) -> str:
    value = data.get(key)
    return value if isinstance(value, str) else ""


def check_turn(
    store: MemoryStore,
    data: dict[str, Any],
    now: datetime,
    call: ChatFn | None,
    similarity: SimilarityFn | None,
) -> CheckResult:
    paths = store.paths
    result = CheckResult()
    answer = _str(data, "answer")
    if not answer.strip():
        return result  # an interrupted turn: nothing is counted
    workspace = _str(data, "workspace")
    shown_ids = [i for i in data.get("shown") or [] if isinstance(i, str)]
    rules = [m for m in store.active("rule") if m.visible_in(workspace)][:SESSION_RULE_LIMIT]
    by_id = {m.id: m for m in store.all() if m.active and m.visible_in(workspace)}
    facts = [by_id[i] for i in shown_ids if i in by_id and by_id[i].category == "project"]
    rules_shown = sum(1 for i in shown_ids if i in by_id and by_id[i].category == "rule")
    if rules and call is not None:
        pairs = [(m.id, m.text) for m in rules]
        try:
            reply = call(CHECK_SYSTEM, check_user_message(pairs, answer))
        except Exception as exc:  # the endpoint failed: this turn's rules are simply not checked
            result.problem = "request-failed"
            log(paths, "kept-check-failed", error=type(exc).__name__)
        else:
            verdict = parse_verdict(reply, [m.id for m in rules], answer)
            result.rules_checked = len(rules)
            if verdict.problem:
                result.problem = verdict.problem
                log(paths, "kept-verdict-ignored", problem=verdict.problem)
            result.broken = list(verdict.broken)
    if facts:
        try:
            used = used_facts([m.text for m in facts], answer, similarity)
        except Exception as exc:  # no engine: identifiers alone would bias the share, so skip
            log(paths, "kept-used-failed", error=type(exc).__name__)
            facts, used = [], []
        result.shown_facts = [m.id for m in facts]
        result.used_facts = [m.id for m, u in zip(facts, used, strict=True) if u]
    _record(store, data, result, rules_shown, now)
    return result


def _record(
    store: MemoryStore, data: dict[str, Any], result: CheckResult, rules_shown: int, now: datetime
) -> None:
    paths = store.paths
    if result.broken:
        store.add_counts({i: {fields.BROKEN: 1} for i in result.broken}, now, stamp_field=fields.BROKEN_AT)
        texts = {m.id: m.text for m in store.active("rule")}
        leave_notice(
            paths,
            _str(data, "host"),
            _str(data, "sessionKey"),
            [(i, texts[i]) for i in result.broken if i in texts],
        )
        log(paths, "kept-rules-broken", ids=",".join(result.broken))
    if result.shown_facts:
        used = set(result.used_facts)
        store.add_counts(
            {i: {fields.SHOWN: 1, fields.USED: 1 if i in used else 0} for i in result.shown_facts}, now
        )
    ledger.add_turn(
        paths,
        _str(data, "workspace"),
        {
            "rulesShown": rules_shown,
            "factsShown": len(result.shown_facts),
            "factsUsed": len(result.used_facts),
            "rulesBroken": len(result.broken),
        },
    )


def judge_call(paths: DataPaths, config: Config, now: datetime, rules: int, answer: str) -> ChatFn | None:
    """The judge, when it may be asked: learning on, the key bound to the endpoint, budget left."""
    from memself.errors import MemselfError
    from memself.judge.credentials import key_for_endpoint
    from memself.judge.http import chat
    from memself.judge.start import deposition_configured
    from memself.views.budget import estimate_tokens

    if not rules or not deposition_configured(paths, config):
        return None
    try:
        api_key, base = key_for_endpoint(paths, str(config.sideApiBase))
    except MemselfError:
        return None
    # The rules' texts are at most 400 characters each; the reply is a short JSON.
    tokens = estimate_tokens(CHECK_SYSTEM + answer) + rules * 200 + 200
    if not ledger.charge(paths, now, tokens):
        log(paths, "kept-budget-spent")
        return None
    model = str(config.sideApiModel)

    def call(system: str, user: str) -> str:
        return chat(base, model, api_key, system, user, CHECK_TIMEOUT_S)

    return call


def engine_similarity(paths: DataPaths) -> SimilarityFn:
    def similarity(facts: Sequence[str], sentences: Sequence[str]) -> list[float]:
        from memself.engine.client import call_engine
        from memself.engine.protocol import OP_SIMILARITY

        result = call_engine(paths, OP_SIMILARITY, {"facts": list(facts), "sentences": list(sentences)}, 60.0)
        best = result.get("best")
        if not isinstance(best, list) or len(best) != len(facts):
            raise ValueError("bad similarity answer")
        return [float(b) for b in best]

    return similarity


def main(argv: list[str]) -> int:
    """The detached run: ``<data root> <hand-off file>``; every failure goes to the log."""
    paths = DataPaths(argv[0])
    data = read_handoff(Path(argv[1]))
    if data is None:
        return 0
    try:
        now = datetime.now(timezone.utc)
        config = load_config(paths)
        store = MemoryStore(paths)
        workspace = _str(data, "workspace")
        rules = len([m for m in store.active("rule") if m.visible_in(workspace)][:SESSION_RULE_LIMIT])
        call = judge_call(paths, config, now, rules, _str(data, "answer"))
        result = check_turn(store, data, now, call, engine_similarity(paths))
    except Exception as exc:
        log(paths, "kept-check-failed", error=f"{type(exc).__name__}: {exc}")
        return 1
    log(
        paths,
        "kept-check-done",
        rules=result.rules_checked,
        broken=len(result.broken),
        facts=len(result.shown_facts),
        used=len(result.used_facts),
        problem=result.problem,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
