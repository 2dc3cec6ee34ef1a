"""Every op the engine answers is declared once, in ``memself.engine.protocol``, and the recall
service handles exactly the service ops declared there: none advertised and left unhandled."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from memself.engine import protocol
from memself.errors import InvalidInput
from memself.paths import DataPaths
from memself.warm.service import RecallService

REPO_ROOT = Path(__file__).resolve().parent.parent


def op_assignments() -> dict[str, list[str]]:
    """``OP_*`` constant name -> the source files that assign it."""
    found: dict[str, list[str]] = {}
    for path in sorted((REPO_ROOT / "memself").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name) and target.id.startswith("OP_"):
                        found.setdefault(target.id, []).append(str(path.relative_to(REPO_ROOT)))
    return found


def test_ops_are_declared_once_in_the_protocol() -> None:
    found = op_assignments()
    assert found, "no op found: the check would be vacuous"
    assert {name: files for name, files in found.items() if files != ["memself/engine/protocol.py"]} == {}
    values = [getattr(protocol, name) for name in found]
    assert len(values) == len(set(values))
    assert protocol.ENGINE_OPS | protocol.SERVICE_OPS == set(values)


def test_the_service_handles_every_service_op_and_nothing_else(isolated_home: Path) -> None:
    service = RecallService(DataPaths.default())
    service.recall = lambda text, now, workspace: {"rule": [], "project": []}  # type: ignore[method-assign]
    service.preview = lambda text, workspace: {"groups": []}  # type: ignore[method-assign]
    service.nearest = lambda text, k, workspace: []  # type: ignore[method-assign]
    service.similarity = lambda facts, sentences: []  # type: ignore[method-assign]
    stop = json.dumps({"hook_event_name": "Stop", "session_id": "s"}).encode()
    payloads = {
        protocol.OP_RECALL: {"text": "t", "now": "2026-11-30T09:00:00+00:00"},
        protocol.OP_NEAREST: {"text": "t", "k": 1},
        protocol.OP_PREVIEW: {"text": "t"},
        protocol.OP_SIMILARITY: {"facts": ["f"], "sentences": ["s"]},
        protocol.OP_HOOK_FORWARD: {"host": "claude", "stdinHex": stop.hex(), "env": {}},
    }
    assert set(payloads) == protocol.SERVICE_OPS
    for op, payload in payloads.items():
        assert isinstance(service.handle(op, payload), dict), op
    for op in ("hook", "encode", *protocol.ENGINE_OPS):
        with pytest.raises(InvalidInput):
            service.handle(op, {})
