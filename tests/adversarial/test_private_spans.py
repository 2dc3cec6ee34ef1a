"""``<private>`` spans never leave the turn: a prompt through the real hook entry, the real
detached judge and a real judge server on 127.0.0.1; the span's marker reaches no request, no
file of the data directory or the runtime directory, and no log line, in whatever form the tags
come (unclosed, nested, stray, look-alike characters, across a code fence)."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import pytest

from memself.hosts import HOSTS
from memself.hosts.base import EventKind
from memself.judge import jobs
from memself.judge.proposal_id import normalise_prompt
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from memself.text.input_filter import classify_input
from memself.text.private import OPENERS, strip_private
from tests.support.hookproc import hook_data, run_entry
from tests.support.judge_helpers import configure
from tests.support.judge_server import not_memory, running_judge, sse

__all__ = ["hook_data"]

VISIBLE = "记住：以后回答都用中文，提交信息也用中文写"
MARKER = "PurpleOctopusQuartz"


@pytest.mark.parametrize(
    ("prompt", "expected"),
    [
        ("前面 <private>x</private> 后面", "前面   后面"),
        ("前面<PRIVATE>x</Private>后面", "前面 后面"),
        ("前面< private >x< / private >后面", "前面 后面"),
        ("前面<private reason='密码'>x</private>后面", "前面 后面"),
        ("前面<private>x 一直到结尾", "前面"),
        ("前面<private>a<private>b</private>c</private>后面", "前面 后面"),
        ("前面</private>中间<private>x</private>后面", "前面 中间 后面"),
        ("前面＜ｐｒｉｖａｔｅ＞x＜／ｐｒｉｖａｔｅ＞后面", "前面 后面"),
        ("前面〈private〉x〈/private〉后面", "前面 后面"),
        ("前面<pri\u200bvate>x</private>后面", "前面 后面"),
        ("前面<рrivate>x</private>后面", "前面 后面"),  # a Cyrillic "р"
        ("一\n<private>\nx\n</private>\n二", "一\n\n\n二"),
        ("没有标签的提示", "没有标签的提示"),
        ("<div> 怎么居中", "<div> 怎么居中"),
    ],
)
def test_spans_are_cut(prompt: str, expected: str) -> None:
    assert strip_private(prompt) == expected
    assert strip_private(strip_private(prompt)) == strip_private(prompt)


def test_every_look_alike_of_the_angle_bracket_is_looked_for() -> None:
    """The quick check that skips folding misses no character the fold table reads as "<"."""
    from memself.text import fold

    table = fold._load()
    for code, to in table.items():
        folded = chr(to) if isinstance(to, int) else to or ""
        if "<" in folded:
            assert OPENERS.match(chr(code)), hex(code)


def _prompts() -> dict[str, str]:
    m = MARKER
    return {
        "plain": f"{VISIBLE} <private>{m}</private>",
        "unclosed": f"{VISIBLE} <Private>我的密码是 {m}\n还有别的",
        "nested": f"{VISIBLE} <private>外<private>内</private>{m}</private>",
        "stray-close-first": f"{VISIBLE} </private><private>{m}",
        "fullwidth": f"{VISIBLE} ＜ｐｒｉｖａｔｅ＞{m}＜／ｐｒｉｖａｔｅ＞",
        "zero-width": f"{VISIBLE} <priv\u200bate>{m}</private>",
        "across-fence": f"{VISIBLE}\n<private>\n```\n{m}\n```\n</private>\n结尾也要看到",
        "fence-inside-out": f"{VISIBLE}\n```\n<private>\n```\n{m}\n</private>",
    }


def test_marker_never_reaches_the_judge_nor_the_disk(hook_data: DataPaths) -> None:
    paths = hook_data
    prompts = _prompts()
    with running_judge() as judge:
        configure(paths, judge.url, confirm=False)
        judge.script(*[sse(not_memory()) for _ in prompts])
        for n, (name, prompt) in enumerate(prompts.items()):
            assert MARKER not in classify_input(strip_private(prompt)).recall_text, name
            _prompt_hook(f"sess-{name}", prompt, f"p-{n}")
        _wait_for_jobs(paths, len(prompts))
        sent = [json.dumps(r.body, ensure_ascii=False) + r.raw for r in judge.requests]
    # Every prompt was judged, with its visible words: the judge ran, only without the span.
    assert len(sent) == len(prompts)
    assert all("以后回答都用中文" in body for body in sent)
    assert not [body for body in sent if MARKER in body]
    # Nor the raw prompt's hash (a short secret could be guessed back from it).
    hashes = {hashlib.sha256(normalise_prompt(p).encode()).hexdigest() for p in prompts.values()}
    roots = [paths.root, Path(os.environ["MEMSELF_RUNTIME_DIR"])]
    for root in roots:
        for file in (f for f in root.rglob("*") if f.is_file()):
            data = file.read_bytes()
            assert MARKER.encode() not in data, file
            assert not [h for h in hashes if h.encode() in data], file
    assert paths.log_file.is_file() and MARKER not in paths.log_file.read_text()
    assert MemoryStore(paths).all() == []


def test_a_remembered_fact_keeps_only_the_visible_part(hook_data: DataPaths) -> None:
    """Confirmation off, the judge remembers what it was sent: the memory has no marker because
    the judge never had one."""
    from tests.support.judge_server import remember

    paths = hook_data
    with running_judge() as judge:
        configure(paths, judge.url, confirm=False)
        judge.script(sse(remember("回答问题时一律使用中文", "rule", "以后回答都用中文")))
        _prompt_hook("sess-keep", f"{VISIBLE}<private>{MARKER}</private>", "p-keep")
        [job] = _wait_for_jobs(paths, 1)
        assert MARKER not in job["prompt"] and "以后回答都用中文" in job["prompt"]
        assert MARKER not in judge.requests[0].raw
    [memory] = MemoryStore(paths).all()
    assert memory.text == "回答问题时一律使用中文"


def _prompt_hook(session: str, prompt: str, turn: str) -> None:
    data = {
        "hook_event_name": HOSTS["claude"].EVENT_NAMES[EventKind.PROMPT_SUBMIT],
        "session_id": session,
        "cwd": "/tmp",
        "prompt": prompt,
        "prompt_id": turn,
    }
    proc = run_entry("claude", json.dumps(data, ensure_ascii=False).encode())
    assert proc.rc == 0, proc.stderr[-2000:]


def _wait_for_jobs(paths: DataPaths, count: int) -> list[dict]:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        found = [jobs.read_job(p) for p in paths.side_dir.glob("s_*.json")]
        if len(found) == count and all(j and j["status"] != "running" for j in found):
            return [j for j in found if j]
        time.sleep(0.1)
    raise AssertionError(f"{count} judge jobs did not finish")


def test_recall_never_sees_the_span() -> None:
    """Recall is local, and still gets the prompt without the span: nothing after the cut can
    keep it, log it or match memories on it."""
    from memself.hook.core import handle
    from memself.hosts.base import HookEvent
    from tests.support.helpers import T0

    paths = DataPaths.default()
    paths.ensure()
    asked: list[str] = []

    def recall(text: str, now: object, workspace: str) -> None:
        asked.append(text)

    for prompt in _prompts().values():
        event = HookEvent("claude", EventKind.PROMPT_SUBMIT, "", "s1", "", prompt, "/tmp", False)
        handle(event, T0, paths, recall=recall)
    assert len(asked) == len(_prompts())
    assert all("以后回答都用中文" in text and MARKER not in text for text in asked)
