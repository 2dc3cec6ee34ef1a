"""Golden files: for every host x event x mode, the exact bytes the real hook entry prints.

Payload in (captured from the real clients, or Cursor's documented shape) -> ``python -I -S
memself/hooks/entry.py --agent HOST`` with the mode's data directory -> compare stdout with
``tests/fixtures/golden/<host>/<event>__<mode>.json`` (empty file: the hook prints nothing).

Regenerate only on purpose: ``MEMSELF_UPDATE_GOLDEN=1 pytest tests/test_golden.py``, then review
the diff. The clock is fixed through ``MEMSELF_NOW``; engines host the test service.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from memself.hosts import HOSTS
from memself.paths import DataPaths
from tests.support.hookproc import hook_data, hook_runs, load_payloads, run_entry

__all__ = ["hook_data"]

GOLDEN = Path(__file__).parent / "fixtures" / "golden"
UPDATE = os.environ.get("MEMSELF_UPDATE_GOLDEN") == "1"
NOW = "2026-11-30T10:00:00+08:00"

_CLAUDE = load_payloads("claude-code-2.1.332.json")
_CODEBUDDY = load_payloads("codebuddy-code-2.117.0.json")
_CURSOR = load_payloads("cursor-documented.json")
# host -> event label -> payload. Labels are the capture's keys ("Stop-2": stop_hook_active).
PAYLOADS: dict[str, dict[str, dict]] = {
    "claude": {k: _CLAUDE[k] for k in ("SessionStart", "UserPromptSubmit", "Stop", "Stop-2")},
    "cursor": {k: _CURSOR[k] for k in ("sessionStart", "beforeSubmitPrompt", "stop", "stop-2")},
    "codebuddy": {
        k: _CODEBUDDY[k] for k in ("SessionStart", "UserPromptSubmit", "UserPromptSubmit-2", "Stop", "Stop-2")
    },
    "workbuddy": {k: _CODEBUDDY[k] for k in ("SessionStart", "UserPromptSubmit", "Stop", "Stop-2")},
}
assert set(PAYLOADS) == set(HOSTS), "every host needs golden payloads"

RULES = [
    ("mem-golden-r1", "回答一律使用简体中文", 0.9, "2026-11-29T08:00:00.000Z"),
    ("mem-golden-r2", "改完代码不要自动 git commit，等用户确认", 0.7, "2026-11-28T08:00:00.000Z"),
    ("mem-golden-r3", "Python 代码使用 ruff 格式化并保持类型标注完整", 0.7, "2026-11-29T09:00:00.000Z"),
]
PROJECT = [
    ("mem-golden-p1", "支付页灰度开关是 pay_new_flow", 0.6, "2026-11-29T08:00:00.000Z"),
]
# Every captured payload was recorded in this directory (Cursor's as its workspace root).
WORKSPACE = "/home/dev/project"
# Scoped rules: the payloads' workspace's is injected with the global ones, the other's never.
SCOPED_RULES = [
    ("mem-golden-w1", "这个仓库用 pnpm，不要用 npm", 0.8, "2026-11-29T08:00:00.000Z", WORKSPACE),
    (
        "mem-golden-w2",
        "这个仓库的提交信息用英文写",
        0.95,
        "2026-11-29T08:00:00.000Z",
        "/home/dev/other-service",
    ),
]


def seed_memories(paths: DataPaths) -> None:
    """Fixed ids and times in the original's record format, so outputs are reproducible."""
    for group, items in (("rule", RULES), ("project", PROJECT)):
        lines = [
            json.dumps(
                {
                    "id": mid,
                    "text": text,
                    "confidence": conf,
                    "category": group,
                    "evidence": "golden",
                    "firstSeen": seen,
                    "lastSeen": seen,
                    "deprecated": False,
                    "createdAt": seen,
                },
                ensure_ascii=False,
            )
            for mid, text, conf, seen in items
        ]
        if group == "rule":
            lines += [
                json.dumps(
                    {
                        "id": mid,
                        "text": text,
                        "confidence": conf,
                        "category": "rule",
                        "evidence": "golden",
                        "firstSeen": seen,
                        "lastSeen": seen,
                        "deprecated": False,
                        "createdAt": seen,
                        "workspace": workspace,
                        "workspaceName": workspace.rsplit("/", 1)[-1],
                    },
                    ensure_ascii=False,
                )
                for mid, text, conf, seen, workspace in SCOPED_RULES
            ]
        paths.group_file(group).write_text("\n".join(lines) + "\n", encoding="utf-8")


def _config(paths: DataPaths, **values: object) -> None:
    paths.config.write_text(json.dumps(values, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")


def _judge(paths: DataPaths, confirm: bool) -> None:
    # An address nothing listens on: a judge spawned by the prompt hook fails fast.
    _config(paths, sideApiBase="http://127.0.0.1:9/v1", sideApiModel="judge-golden", confirm=confirm)
    # Bound to that address, as setup or memself key set leave it (an unbound key pauses learning).
    key = {"apiKey": "sk-golden-not-real", "boundApiBase": "http://127.0.0.1:9/v1"}
    paths.side_secret.write_text(json.dumps(key), encoding="utf-8")
    os.chmod(paths.side_secret, 0o600)


# mode -> set-up of the data directory (after the memories are seeded). Add modes here (e.g.
# pending judge results for Stop) and regenerate.
MODES: dict[str, Callable[[DataPaths], None]] = {
    "nojudge": lambda paths: None,
    "judge-confirm": lambda paths: _judge(paths, confirm=True),
    "judge-noconfirm": lambda paths: _judge(paths, confirm=False),
    "disabled": lambda paths: _config(paths, enabled=False),
}

CASES = [(host, event, mode) for host in PAYLOADS for event in PAYLOADS[host] for mode in MODES]


def golden_path(host: str, event: str, mode: str) -> Path:
    return GOLDEN / host / f"{event}__{mode}.json"


@pytest.mark.parametrize(("host", "event", "mode"), CASES, ids=[f"{h}-{e}-{m}" for h, e, m in CASES])
def test_golden(host: str, event: str, mode: str, hook_data: DataPaths) -> None:
    seed_memories(hook_data)
    MODES[mode](hook_data)
    proc = run_entry(
        host,
        json.dumps(PAYLOADS[host][event], ensure_ascii=False).encode(),
        # Hosts start hooks in the project (CodeBuddy's SessionStart names it no other way).
        env=dict(os.environ, MEMSELF_NOW=NOW, PWD=WORKSPACE),
    )
    assert proc.rc == 0
    proc.answer()  # nothing, or exactly one JSON object
    [run] = [r for r in hook_runs(hook_data) if r["host"] == host]
    assert "error" not in run, run  # a crash must not pass as a golden "nothing"
    path = golden_path(host, event, mode)
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(proc.stdout)
        return
    assert path.exists(), f"no golden file {path}; generate with MEMSELF_UPDATE_GOLDEN=1"
    expected = path.read_bytes()
    assert proc.stdout.decode("utf-8") == expected.decode("utf-8")


@pytest.mark.parametrize("host", sorted(PAYLOADS))
def test_every_golden_payload_maps_to_its_workspace(host: str) -> None:
    # No environment: the payload's own field decides, except where the host sends none.
    for label, payload in PAYLOADS[host].items():
        event = HOSTS[host].parse(payload, {})
        if host in ("codebuddy", "workbuddy") and label == "SessionStart":
            assert (event.cwd, event.workspace) == ("", ""), label
            project_dir = {"codebuddy": "CODEBUDDY_PROJECT_DIR", "workbuddy": "WORKBUDDY_PROJECT_DIR"}[host]
            for env in ({project_dir: WORKSPACE}, {"PWD": WORKSPACE}):
                assert HOSTS[host].parse(payload, env).workspace == WORKSPACE, (label, env)
            continue
        assert event.workspace == WORKSPACE, label


def test_no_stale_golden_files() -> None:
    expected = {golden_path(*case) for case in CASES}
    present = set(GOLDEN.glob("*/*.json"))
    assert present - expected == set(), "golden files without a case: delete them"
    if not UPDATE:
        assert expected - present == set()
