"""Dedup candidates chosen by the real embedding model (offline multilingual-e5-small)."""

from __future__ import annotations

import json
from datetime import timedelta

import numpy as np
import pytest

from memself.config import load_config
from memself.judge import jobs
from memself.judge.worker import run_job
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore
from tests.support.judge_helpers import NOW, clock, configure, start_job
from tests.support.judge_server import dedup, remember, running_judge, sse

LIBRARY = [
    ("回答问题时一律使用中文", "rule"),
    ("git 提交信息使用英文并遵循 Conventional Commits", "rule"),
    ("支付页新流程的灰度开关是 pay_new_flow", "project"),
    ("ImageLoader 负责图片加载与缓存", "project"),
    ("代码缩进统一用两个空格", "rule"),
    ("数据库迁移脚本放在 db/migrations 目录", "project"),
]


def e5_nearest(encoder, store: MemoryStore):
    def nearest(text: str, k: int, workspace: str):
        active = [m for m in store.all() if m.active and m.visible_in(workspace)]
        if not active:
            return []
        docs = encoder.encode_passages([m.text for m in active])
        query = encoder.encode_queries([text])[0]
        scores = np.asarray(docs) @ np.asarray(query)
        order = np.argsort(-scores)[:k]
        return [(active[i], float(scores[i])) for i in order]

    return nearest


@pytest.mark.full
def test_dedup_candidates_are_the_nearest_active_memories(e5_encoder) -> None:
    paths = DataPaths.default()
    store = MemoryStore(paths)
    made = {text: store.create(text, group, NOW - timedelta(days=5)) for text, group in LIBRARY}
    # A deprecated near-duplicate must never be a candidate.
    stale = store.create("回答时请用简体中文回复", "rule", NOW - timedelta(days=5))
    path = paths.group_file("rule")
    records = [json.loads(line) for line in path.read_text().splitlines()]
    for record in records:
        if record["id"] == stale.id:
            record.update(deprecated=True, confidence=0.4)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    target = made["回答问题时一律使用中文"]
    with running_judge() as judge:
        configure(paths, judge.url, confirm=False)
        sid = start_job(paths, "记住：以后回答都用中文")
        judge.script(sse(remember("回答问题时使用中文")), sse(dedup("reinforce", target.id)))
        job = run_job(
            jobs.job_path(paths, sid),
            clock(NOW),
            e5_nearest(e5_encoder, store),
            store,
            load_config(paths),
            timeout=5,
        )
    message = judge.user_messages[1]
    candidates = json.loads(message.split("\n")[1].removeprefix("candidates："))
    assert len(candidates) == 3 and candidates[0]["id"] == target.id
    assert stale.id not in {c["id"] for c in candidates}
    assert job["proposal"]["action"] == "reinforce" and job["proposal"]["score"] > 0
    assert store.get(target.id).confidence == 0.6 and len(store.all()) == len(LIBRARY) + 1
