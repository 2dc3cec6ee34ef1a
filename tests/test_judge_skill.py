"""The manage skill ships with the package and names exactly the plugin's tools."""

from __future__ import annotations

import re

from memself.install.base import default_skill_source
from memself.mcp_server import TOOL_NAMES

SKILL = default_skill_source() / "SKILL.md"


def test_frontmatter_and_rules() -> None:
    text = SKILL.read_text(encoding="utf-8")
    match = re.match(r"---\nname: (.+)\ndescription: (.+)\n---\n", text)
    assert match and match.group(1) == "memory-self-evolution-manage"
    assert len(match.group(2)) < 1024 and "记忆" in match.group(2)
    for tool in ("memory_list", "memory_read", "memory_update"):
        assert f"`{tool}`" in text
    for action in ('action="delete"', 'action="merge"', 'action="replace"', 'action="move"', "ids=[...]"):
        assert action in text
    assert "AskUserQuestion" in text and "ask_followup_question" in text
    assert "不要直接读写或编辑" in text and "客户端自带的记忆" in text
    mentioned = set(re.findall(r"`(memory_[a-z]+)", text))
    assert mentioned <= set(TOOL_NAMES)  # no tool that does not exist (memory_propose etc.)
