"""Team memories are someone else's text: a repository's ``.memself/`` planted with the injection
corpus is quoted inertly by the MCP tools that now list it, and its origin line cannot be made to
speak either (the repository's path is quoted too)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from memself.mcp_server import MemoryTools
from memself.paths import DataPaths
from memself.store.team import team_memories
from memself.store.workspaces import workspace_of
from tests.adversarial.injection_corpus import LOOKALIKE_SHAPES, SHAPES, inert_problems

CORPORA = {"plain": SHAPES, "lookalike": LOOKALIKE_SHAPES}


@pytest.mark.parametrize("corpus", list(CORPORA))
def test_planted_team_memories_are_listed_inertly(corpus: str, tmp_path: Path) -> None:
    repo = tmp_path / "pay"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / ".memself").mkdir()
    shapes = list(CORPORA[corpus].values())[:40]
    lines = [
        json.dumps({"id": f"t{n}", "text": text, "confidence": 0.7, "category": "rule"}, ensure_ascii=False)
        for n, text in enumerate(shapes)
    ]
    (repo / ".memself" / "rule.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    tools = MemoryTools(DataPaths.default(), "claude", workspace=workspace_of(str(repo)))
    out = tools.call("memory_read", {"group": "rule"}).split("\n")
    listed = [line for line in out if "来源：团队" in line]
    assert len(listed) == len(team_memories(str(repo), "rule")) >= len(shapes) - 2  # a few too long to read
    for line in listed:
        assert inert_problems(line) == [], line[:200]
