"""Parsing the judge's answers: JSON only; anything else means "do not remember"."""

from __future__ import annotations

import pytest

from memself.judge.parse import extract_json, parse_dedup, parse_remember


@pytest.mark.parametrize(
    "body",
    [
        '{"remember": true, "text": "回答问题时使用中文", "group": "rule"}',
        '好的：\n```json\n{"remember": true, "text": "回答问题时使用中文", "group": "rule"}\n```',
        '判断如下 {"remember": "true", "text": "回答问题时使用中文", "group": "rule"} 完毕',
        '{"structured_output": {"remember": true, "text": "回答问题时使用中文", "group": "rule"}}',
        '{"result": "{\\"remember\\": true, \\"text\\": \\"回答问题时使用中文\\", \\"group\\": \\"rule\\"}"}',
    ],
)
def test_remember_found_in_every_wrapping(body: str) -> None:
    answer = parse_remember(body)
    assert answer is not None and answer.remember and answer.text == "回答问题时使用中文"
    assert answer.group == "rule"


def test_group_and_category_keys_and_fallback() -> None:
    assert (
        parse_remember('{"remember":true,"text":"ImageLoader 负责图片缓存","category":"project"}').group
        == "project"
    )
    assert parse_remember('{"remember":true,"text":"ImageLoader 负责图片缓存","group":"x"}').group == "rule"


@pytest.mark.parametrize(
    "body",
    [
        "回答问题时使用中文",  # a plain line is NOT a memory any more
        "",
        '{"remember": true}',
        '{"remember": true, "text": "  "}',
        '{"remember": "maybe", "text": "回答问题时使用中文"}',
        "[1, 2]",
    ],
)
def test_unusable_answers(body: str) -> None:
    assert parse_remember(body) is None


def test_remember_false() -> None:
    answer = parse_remember('{"remember": "false"}')
    assert answer is not None and not answer.remember


def test_dedup_decisions() -> None:
    ids = ["mem-a", "mem-b"]
    assert parse_dedup('{"action":"create","id":"mem-zzz"}', ids).action == "create"
    assert parse_dedup('{"action":"reinforce","id":"mem-b"}', ids).target_id == "mem-b"
    merged = parse_dedup('{"action":"merge","id":"mem-a","text":"合并后的正文内容"}', ids)
    assert (merged.action, merged.merged_text) == ("merge", "合并后的正文内容")
    assert parse_dedup('{"action":"replace","id":"mem-a"}', ids).action == "replace"


@pytest.mark.parametrize(
    "body",
    [
        '{"action":"reinforce","id":"mem-not-a-candidate"}',
        '{"action":"merge","id":"mem-a"}',
        '{"action":"delete","id":"mem-a"}',
        "都差不多",
    ],
)
def test_dedup_unsure(body: str) -> None:
    answer = parse_dedup(body, ["mem-a"])
    assert answer.action == "unsure" and answer.target_id == ""


def test_extract_json_none() -> None:
    assert extract_json("no braces here") is None
