"""A large synthetic recall pool: memories over four workspaces (a few inactive, some rules, some
with requests) and random unit vectors in a shuffled matrix, for tests of how recall scales."""

from __future__ import annotations

import numpy as np

from memself.recall.gate import GateParams
from memself.store.records import Memory

WORKSPACES = ["", "/srv/repos/pay", "/srv/repos/ops", "/srv/repos/web"]
PROMPTS = [
    "支付模块的灰度开关配置在哪里，上线前要检查什么",
    "mongo 连接串放在哪个配置文件",
    "Redis 和 Memcached 有什么区别",
    "部署 payment-service 之前要跑哪些检查？回滚怎么做？",
    "帮我看下订单服务的超时重试策略",
]
# Floors low enough that random vectors give hits (the comparison must have hits to compare).
PARAMS = GateParams(floors={"rule": -1.0, "project": -1.0}, margin=-1.0, top_k=5)


def synthetic(count: int, seed: int) -> tuple[list[Memory], np.ndarray, list[int], list[list[int]]]:
    """``count`` memories over four workspaces (a few inactive, some rules, some with requests),
    random unit vectors for their texts and requests, and their rows in a shuffled matrix."""
    rng = np.random.default_rng(seed)
    memories: list[Memory] = []
    for i in range(count):
        group = "rule" if i % 10 == 0 else "project"
        raw = {
            "id": f"m{i:06d}",
            "text": f"记录 {i}：payment-service 灰度开关 mongo 配置 第 {i % 97} 项说明",
            "category": group,
            "confidence": 0.5,
            "status": "deprecated" if i % 37 == 0 else "active",
            "createdAt": "2026-11-01T00:00:00.000Z",
        }
        workspace = WORKSPACES[i % len(WORKSPACES)]
        if workspace:
            raw["workspace"], raw["workspaceName"] = workspace, workspace.rsplit("/", 1)[1]
        if i % 7 == 0:
            raw["appliesWhen"] = [f"问到第 {i % 13} 类配置时", "上线检查"][: 1 + i % 2]
        memory = Memory.from_json(raw, group)
        assert memory is not None
        memories.append(memory)
    total = count + sum(len(m.appliesWhen) for m in memories)
    order = rng.permutation(total)
    rows = [int(order[i]) for i in range(count)]
    views: list[list[int]] = []
    next_row = count
    for m in memories:
        views.append([int(order[next_row + k]) for k in range(len(m.appliesWhen))])
        next_row += len(m.appliesWhen)
    matrix = rng.standard_normal((total, 384)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    return memories, matrix, rows, views
