"""What rendering memories inertly costs: ``texts.inert`` over 30 typical memories, as the recall
block and session start call it, warm (many rounds in one process: the engine's case) and the
first round of a fresh process (the hook process's case: the look-alike table is built on the
first line that needs it), with everyday memories among them (full-width letters, emoji, a
full-width tilde: the table is built) and with synthetic ones only (Chinese and ASCII: it is not).

    .venv/bin/python bench/bench_inert.py [--rounds 2000] [--fresh 20]

Side by side with another checkout: ``PYTHONPATH=/path/to/other .venv/bin/python
bench/bench_inert.py`` imports that checkout's ``memself`` instead.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

TOPICS = ["支付", "订单", "物流", "司机端", "网关", "缓存", "数据库", "监控", "发布", "权限", "日志", "测试"]
ACTIONS = ["统一使用", "不要直接修改", "上线前要检查", "默认开启", "由平台组维护", "需要评审"]
# Everyday memories beside the synthetic ones: English, a range with a full-width tilde, a dash,
# emoji with a variation selector, full-width letters, a plain link, a comparison.
EVERYDAY = [
    "Python 代码使用 ruff 格式化并保持类型标注完整",
    "改完代码不要自动 git commit，等用户确认",
    "发布窗口是每周二 10～12 点，其余时间只修线上故障",
    "回答先给结论——细节放后面",
    "❤️ 喜欢简短的回答 👍",
    "ＡＰＩ 文档见 [README](https://github.com/acme/pay/blob/main/README.md)",
    "Always answer in English when the question is in English",
    "比较版本用 a >= b，箭头写成 ->",
]


def memories(everyday: bool = True) -> list[str]:
    """30 memories: synthetic ones (Chinese, ASCII identifiers), with the everyday ones or not."""
    extra = EVERYDAY if everyday else []
    synthetic = [
        f"{TOPICS[i % len(TOPICS)]}模块第 {i} 项约定：{ACTIONS[(i // len(TOPICS)) % len(ACTIONS)]} "
        f"flag_{i} 配置，负责人见 wiki 第 {i % 97} 页。"
        for i in range(30 - len(extra))
    ]
    return synthetic + extra


def one_round_us(everyday: bool) -> float:
    """A fresh process's first round (import excluded, table build included), in microseconds."""
    from memself.text.messages import inert

    texts = memories(everyday)
    start = time.perf_counter()
    for text in texts:
        inert(text)
    return (time.perf_counter() - start) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--fresh", type=int, default=20)
    parser.add_argument("--first-round", choices=["everyday", "synthetic"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.first_round:
        print(json.dumps(one_round_us(args.first_round == "everyday")))
        return
    import memself
    from memself.text.messages import inert

    texts = memories()
    for text in texts:
        inert(text)
    samples = []
    for _ in range(args.rounds):
        start = time.perf_counter()
        for text in texts:
            inert(text)
        samples.append((time.perf_counter() - start) * 1e6)
    fresh: dict[str, list[float]] = {"everyday": [], "synthetic": []}
    for _ in range(args.fresh):
        for kind, runs in fresh.items():
            command = [sys.executable, str(Path(__file__).resolve()), "--first-round", kind]
            runs.append(float(subprocess.run(command, capture_output=True, text=True, check=True).stdout))
    print(f"memself from {Path(memself.__file__).parent}\n")
    print("| inert over 30 memories | p50 us |")
    print("|---|---:|")
    print(f"| warm ({args.rounds} rounds in one process) | {statistics.median(samples):.1f} |")
    for kind, runs in fresh.items():
        label = f"first round of a fresh process, {kind} ({args.fresh} processes)"
        print(f"| {label} | {statistics.median(runs):.1f} |")


if __name__ == "__main__":
    main()
