"""Engine memory under a long, varied use: RSS of the engine process while it answers many unique
prompt hooks from many workspaces and sessions.

A real engine (``memself engine start``) on a store of 1k memories (some of them scoped to the
workspaces), the offline model (multilingual-e5-small) from the shared model cache. Each prompt
is a Claude Code ``UserPromptSubmit`` with a prompt never sent before, from one of W workspace
folders (each a repository root) and its own session, forwarded to the engine as the hook's fast
path does. The engine's RSS is read every K prompts; the table gives the start (warm, before the
first prompt), each sample, the end and the growth.

    .venv/bin/python bench/bench_engine_soak.py [--prompts 5000] [--workspaces 200] [--every 500]

Nothing of the user's is touched: a temporary data directory, stopped engine at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_hooks import synthetic_memories, write_group

REPO_ROOT = Path(__file__).resolve().parent.parent
# Common characters and words, so that prompts differ the way real ones do: new words, new
# lengths, new mixtures of Chinese and code names.
HAN = (
    "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动"
    "同工也能下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自"
    "二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日"
    "那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变"
    "条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总"
    "次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指"
    "几九区强放决西被干做必战先回则任取据处队南给色光门即保治北造百规热领七海口东导器"
    "压志世金增争济阶油思术极交受联什认六共权收证改清己美再采转更单风切打白教速花带安"
    "场身车例真务具万每目至达走积示议声报斗完类八离华名确才科张信马节话米整空元况今集"
    "温传土许步群广石记需段研界拉林律叫且究观越织装影算低持音众书布复容儿须际商非验连"
    "断深难近矿千周委素技备半办青省列习响约支般史感劳便团往酸历市克何除消构府称太准精"
    "值号率族维划选标写存候毛亲快效斯院查江型眼王按格养易置派层片始却专状育厂京识适属"
    "圆包火住调满县局照参红细引听该铁价严"
)
WORDS = [
    "缓存",
    "网关",
    "灰度",
    "回滚",
    "发布",
    "索引",
    "事务",
    "队列",
    "重试",
    "限流",
    "熔断",
    "日志",
    "监控",
    "告警",
    "权限",
    "配置",
    "迁移",
    "测试",
]
NAMES = ["user_id", "order_sn", "retry_count", "feature_flag", "trace_id", "shard_key", "tenant", "ttl"]


def prompt_text(rng: random.Random, i: int) -> str:
    han = "".join(rng.choice(HAN) for _ in range(rng.randint(4, 40)))
    words = "、".join(rng.sample(WORDS, rng.randint(1, 4)))
    name = f"{rng.choice(NAMES)}_{rng.randint(0, 10**6)}"
    return f"{words}这块{han}，{name} 要怎么处理？第 {i} 次问"


def scoped_memories(workspaces: list[Path], count: int) -> list[dict]:
    records = synthetic_memories(count, "project")
    for i, record in enumerate(records):
        if i % 3 == 0:  # a third scoped to one workspace each, the rest global
            root = workspaces[i % len(workspaces)]
            record["workspace"], record["workspaceName"] = str(root), root.name
    return records


def rss_kb(pid: int) -> tuple[int, int, int]:
    """RSS, its anonymous part and its file-backed part (mapped files: the model's table), kB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "RssAnon", "RssFile"):
            fields[name] = int(value.split()[0])
    return fields["VmRSS"], fields["RssAnon"], fields["RssFile"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--prompts", type=int, default=5000)
    parser.add_argument("--workspaces", type=int, default=200)
    parser.add_argument("--every", type=int, default=500, help="read the engine's RSS every K prompts")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="memself-bench-soak-"))
    home = work / "data"
    home.mkdir(mode=0o700)
    os.environ.update(
        MEMSELF_HOME=str(home),
        HOME=str(work),
        MEMSELF_RUNTIME_DIR=str(Path("/tmp") / f"msk-{os.getpid()}"),
    )
    os.environ.setdefault("MEMSELF_MODEL_CACHE", str(REPO_ROOT / ".cache" / "models"))
    os.environ.pop("MEMSELF_ENGINE_SERVICE", None)
    env = dict(os.environ)
    roots = []
    for w in range(args.workspaces):
        root = work / "ws" / f"project-{w:04d}"
        (root / ".git").mkdir(parents=True)
        roots.append(root)
    write_group(home, "rule", synthetic_memories(500, "rule"))
    write_group(home, "project", scoped_memories(roots, 500))

    def cli(*argv: str) -> str:
        return subprocess.run(
            [sys.executable, "-m", "memself", *argv],
            env=env,
            cwd=work,
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    cli("config", "model", "multilingual-e5-small")
    cli("engine", "start", "--timeout", "600")

    import memself
    from memself.engine.client import EngineClient
    from memself.hook.process import _close_answered, forward
    from memself.paths import DataPaths

    pid = int(EngineClient(DataPaths(home)).ping(2.0)["pid"])
    print(f"memself {Path(memself.__file__).parent}, engine pid {pid}", file=sys.stderr)
    rng = random.Random(args.seed)
    samples = [(0, rss_kb(pid))]
    recalled = 0
    started = time.monotonic()
    try:
        for i in range(1, args.prompts + 1):
            root = roots[rng.randrange(len(roots))]
            payload = {
                "hook_event_name": "UserPromptSubmit",
                "session_id": f"soak-{root.name}-{i // 5}",
                "prompt_id": f"p{i}",
                "cwd": str(root / "src"),
                "prompt": prompt_text(rng, i),
            }
            outcome = forward("claude", json.dumps(payload, ensure_ascii=False).encode(), time.time(), 30.0)
            if outcome is None or outcome[0] != "out":
                raise SystemExit(f"prompt {i}: the engine answered {outcome!r}")
            recalled += "additionalContext" in str(outcome[1])
            _close_answered(True)
            if i % args.every == 0 or i == args.prompts:
                samples.append((i, rss_kb(pid)))
                print(f"  {i:>6} prompts  {samples[-1][1][0] / 1024:7.1f} MB", file=sys.stderr)
    finally:
        elapsed = time.monotonic() - started
        subprocess.run([sys.executable, "-m", "memself", "engine", "stop"], env=env, cwd=work, check=False)
        shutil.rmtree(work, ignore_errors=True)

    start_kb, end_kb = samples[0][1][0], samples[-1][1][0]
    peak_kb = max(kb[0] for _, kb in samples)
    print(
        f"\nengine RSS, 1k memories, {args.prompts} unique prompts across {args.workspaces} workspaces "
        f"({elapsed:.0f} s, {recalled} answered with context)"
    )
    print("| prompts | RSS MB | anonymous MB | mapped files MB |")
    print("|---:|---:|---:|---:|")
    for count, (total, anon, mapped) in samples:
        print(f"| {count} | {total / 1024:.1f} | {anon / 1024:.1f} | {mapped / 1024:.1f} |")
    growth = (end_kb - start_kb) / start_kb * 100
    print(
        f"\nstart {start_kb / 1024:.1f} MB, end {end_kb / 1024:.1f} MB, peak {peak_kb / 1024:.1f} MB, "
        f"growth {growth:+.1f} %"
    )


if __name__ == "__main__":
    main()
