"""The rule check: the prompt the judge reads, and the reading of its answer.

The endpoint is outside the machine's trust, so an answer is taken only whole: every rule it
names must be one in force for the turn, and every sentence it quotes must be in the answer it
was sent. Anything else (an invented id, a rule not in force, a quote the answer never had,
malformed JSON) is ignored as a whole, and the caller logs it: nothing is counted then.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from memself.judge.parse import extract_json
from memself.text.redact import redact

CHECK_SYSTEM = """\
你是「规则遵守」检查器。输入是用户给编程助手定下的长期规则 rules（每条有 id 和 text），\
以及助手这一轮给用户的最终回答 answer。

只找回答明显违反的规则：回答里有一句话直接和规则相悖（例如规则要求用中文回答，回答却整段是英文）。\
规则和这一轮无关、回答没有涉及、无法判断，或者只是没有提到，都不算违反。拿不准时不算违反。

只输出一个 JSON 对象，不要代码块，不要任何解释：
{"broken": []}
或
{"broken": [{"id": "规则的 id", "sentence": "回答里显示违反的那一句，原样摘录"}]}
id 必须原样取自 rules；sentence 必须是 answer 里原有的一句话。
"""

MAX_BROKEN = 10
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class Verdict:
    """``broken``: rule ids the answer broke (in force, each with its quote found in the
    answer); ``problem``: why the answer was ignored ("" when it was taken)."""

    broken: tuple[str, ...] = ()
    problem: str = ""


def check_user_message(rules: Sequence[tuple[str, str]], answer: str) -> str:
    # Redacted before JSON encoding, as the dedup candidates are: the whole request is redacted
    # again where its body is built.
    items = [{"id": mem_id, "text": redact(text)} for mem_id, text in rules]
    return f"rules：{json.dumps(items, ensure_ascii=False)}\nanswer：\n{answer}"


def _squeezed(text: str) -> str:
    return _SPACE.sub("", text)


def parse_verdict(reply: str, rule_ids: Sequence[str], answer: str) -> Verdict:
    data = extract_json(reply)
    if data is None:
        return Verdict(problem="malformed")
    items = data.get("broken")
    if not isinstance(items, list) or len(items) > MAX_BROKEN:
        return Verdict(problem="malformed")
    in_force = set(rule_ids)
    plain_answer = _squeezed(answer)
    broken: list[str] = []
    for item in items:
        if not isinstance(item, dict):
            return Verdict(problem="malformed")
        mem_id, sentence = item.get("id"), item.get("sentence")
        if not isinstance(mem_id, str) or not isinstance(sentence, str) or not sentence.strip():
            return Verdict(problem="malformed")
        if mem_id not in in_force:
            return Verdict(problem="not-in-force")
        if _squeezed(sentence) not in plain_answer:
            return Verdict(problem="quote-not-in-answer")
        broken.append(mem_id)
    return Verdict(tuple(dict.fromkeys(broken)))
