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


def test_applies_when_read_cleaned_and_bounded() -> None:
    body = (
        '{"remember": true, "text": "所有存库的时间一律使用 UTC", "group": "rule", "appliesWhen": '
        '["记一下取件时间", 7, "两行\\n请求", "记一下取件时间", "x", "第三条", "第四条", "第五条"]}'
    )
    answer = parse_remember(body)
    assert answer is not None and answer.applies_when == ("记一下取件时间", "两行 请求", "第三条", "第四条")
    plain = parse_remember('{"remember": true, "text": "所有存库的时间一律使用 UTC"}')
    assert plain is not None and plain.applies_when == ()


@pytest.mark.parametrize("value", ['"一条请求"', "{}", "null", "3", '[["嵌套"]]', '["' + "长" * 81 + '"]'])
def test_malformed_applies_when_is_none_and_the_answer_stands(value: str) -> None:
    answer = parse_remember(
        f'{{"remember": true, "text": "所有存库的时间一律使用 UTC", "appliesWhen": {value}}}'
    )
    assert answer is not None and answer.text == "所有存库的时间一律使用 UTC" and answer.applies_when == ()
    merged = parse_dedup(
        f'{{"action":"merge","id":"mem-a","text":"合并后的正文内容","appliesWhen":{value}}}', ["mem-a"]
    )
    assert merged.action == "merge" and merged.applies_when == ()


def test_applies_when_redacted() -> None:
    answer = parse_remember(
        '{"remember": true, "text": "数据库连接信息放在 .env", '
        '"appliesWhen": ["把数据库密码改成 Xy7kq9Lm2w"]}'
    )
    assert answer is not None and answer.applies_when == ("把数据库密码改成 [已隐去]",)
    merged = parse_dedup(
        '{"action":"merge","id":"mem-a","text":"合并后的正文内容",'
        '"appliesWhen":["密码是 Xy7kq9Lm2w 的那个库"]}',
        ["mem-a"],
    )
    assert "Xy7kq9Lm2w" not in "".join(merged.applies_when) and merged.applies_when


def test_the_prompts_examples_parse_with_their_requests() -> None:
    from memself.judge.prompts import DEDUP_SYSTEM, REMEMBER_SYSTEM

    examples = [
        line.removeprefix("输出：") for line in REMEMBER_SYSTEM.splitlines() if line.startswith("输出：")
    ]
    answers = [parse_remember(e) for e in examples]
    kept = [a for a in answers if a is not None and a.remember]
    assert len(kept) == 3 and all(2 <= len(a.applies_when) <= 4 for a in kept)
    assert all(a.text not in a.applies_when for a in kept)
    merges = [line for line in DEDUP_SYSTEM.splitlines() if line.startswith('输出：{"action": "merge"')]
    [merge] = [parse_dedup(m.removeprefix("输出："), ["mem-b"]) for m in merges]
    assert merge.action == "merge" and 2 <= len(merge.applies_when) <= 4
