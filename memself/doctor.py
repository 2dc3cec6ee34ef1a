"""``memself doctor``: one screen saying what is installed where, what works, and what to run.

Each check is a small function returning ``Check``; they never raise, so one broken part does
not hide the state of the others. The judge check sends one real request (the key is never
shown); the engine check starts the engine if none runs, which also proves the model loads.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from memself.errors import MemselfError
from memself.install import INSTALLERS, context_for
from memself.install.base import InstallContext, default_skill_source
from memself.paths import DataPaths
from memself.text.messages import backlog_progress, model_problem_lines, reload_failed_line

if TYPE_CHECKING:
    from memself.store.records import Memory

Echo = Callable[[str], None]
_ENGINE_WAIT_S = 90.0
_JUDGE_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class Check:
    """One line of the report. ``ok`` False is a fault: something memself is set up to do does
    not work (a registration setup would write, the data, the model, the engine, the configured
    judge); only faults make doctor exit 1. ``ok`` None is not a fault: with a ``fix`` a warning
    (⚠: memself works, and what is left is a choice, or a step memself cannot take itself, given
    exactly), without one a note (-: a client not installed, nothing made yet). ``fix`` is the
    repair under a ✗ (修复), advice otherwise (建议)."""

    name: str
    ok: bool | None
    summary: str
    fix: str = ""


def check_install(paths: DataPaths) -> Check:
    import memself

    package = Path(memself.__file__).resolve().parent
    return Check(
        "memself",
        True,
        f"版本 {memself.__version__}，Python {sys.executable}，代码 {package}，数据目录 {paths.root}",
    )


def check_host(name: str, ctx: InstallContext) -> Check:
    """Registered and current? A plan whose preview changes nothing means exactly that."""
    installer = INSTALLERS[name]
    if not installer.detect(ctx.home):
        return Check(installer.label, None, f"未安装（{installer.config_root(ctx.home)} 不存在），跳过")
    try:
        results = [step.preview() for step in installer.plan(ctx)]
    except MemselfError as exc:
        return Check(installer.label, False, str(exc), f"修好后运行 memself setup --only {name}")
    stale = [r for r in results if r.changed]
    if not stale:
        where = "；".join(f"{r.purpose} → {r.target}" for r in results)
        return Check(installer.label, True, f"已注册：{where}")
    missing = "；".join(f"{r.purpose}（{r.target}）" for r in stale)
    manual = [r.manual for r in stale if r.manual]
    if len(manual) == len(stale):
        # Only steps setup cannot take either (it prints them too): sending the user back to
        # setup would not help, so this is a warning whose line is the step itself.
        done = [r.purpose for r in results if not r.changed]
        registered = f"；{'、'.join(done)}已注册" if done else ""
        what = "、".join(r.purpose for r in stale)
        where = "、".join(r.target for r in stale)
        steps = "；".join(m.replace("\n", "；") for m in manual)
        why = "；".join(r.manual_why for r in stale if r.manual_why)
        return Check(
            installer.label,
            None,
            f"{what}未注册（{where}），需要手动运行：{steps}{registered}",
            why or "手动运行上面的命令",
        )
    fix = f"memself setup --only {name}"
    if manual:
        fix += "，并手动运行：" + manual[0].replace("\n", "；")
    return Check(installer.label, False, f"未注册或指向旧的路径：{missing}", fix)


def memory_counts(memories: list[Memory]) -> str:
    """「共 5 条记忆（所有项目：rule 2 条、project 1 条；pay-service：project 2 条）」: global
    first, then each workspace by name (with its path when two share a name); "" when none."""
    if not memories:
        return ""
    from collections import Counter

    from memself.store.records import GROUPS
    from memself.text.messages import SCOPE_GLOBAL, workspace_label

    names: dict[str, str] = {}
    counts: dict[str, Counter[str]] = {}
    for memory in memories:
        names.setdefault(memory.workspace, memory.workspaceName)
        counts.setdefault(memory.workspace, Counter())[memory.category] += 1
    shared = Counter(names[k] for k in names if k)
    parts = []
    for key in sorted(names, key=lambda k: (k != "", names[k].casefold(), k)):
        label = (
            SCOPE_GLOBAL
            if not key
            else names[key]
            if shared[names[key]] == 1
            else workspace_label(key, names[key])
        )
        by_group = "、".join(f"{g} {counts[key][g]} 条" for g in GROUPS if counts[key][g])
        parts.append(f"{label}：{by_group}")
    return f"共 {len(memories)} 条记忆（{'；'.join(parts)}）"


def check_data(paths: DataPaths) -> Check:
    """The memory files read whole, the write lock is usable, no interrupted write is pending;
    how many memories there are, globally and per workspace."""
    from memself.store.journal import intent_path
    from memself.store.lock import lock_problem
    from memself.store.memory_store import MemoryStore

    problem = lock_problem(paths.lock_dir)
    if problem:
        return Check("记忆数据", False, problem, f"确认没有 memself 或原插件在运行后：rm -r {paths.lock_dir}")
    if not paths.root.is_dir():
        return Check("记忆数据", True, "还没有记忆文件（第一次写入时创建）")
    try:
        store = MemoryStore(paths)
        bad = store.quarantined()
        counted = memory_counts(store.all())
    except MemselfError as exc:
        return Check("记忆数据", False, str(exc), f"检查 {paths.root} 的权限")
    counts = f"；{counted}" if counted else ""
    if bad:
        shown = "；".join(f"{name} 第 {line.line_no} 行（{line.reason}）" for name, line in bad[:5])
        more = f"等 {len(bad)} 行" if len(bad) > 5 else ""
        paused = "；每日衰减在修好之前暂停" if any(n != paths.trash.name for n, _ in bad) else ""
        return Check(
            "记忆数据",
            False,
            f"{shown}{more}无法读取，已隔离：原样保留在文件里，其余记忆照常注入和召回{paused}{counts}",
            f"用编辑器打开 {paths.root} 里的这些文件，修好或删掉这几行（memself list 也会列出）",
        )
    pending = " 有一次被中断的写入待完成，下次写入时自动补完；" if intent_path(paths).exists() else ""
    names = [p.name for p in (paths.group_file("rule"), paths.group_file("project"), paths.trash)]
    present = [name for name in names if (paths.root / name).exists()]
    absent = [name for name in names if name not in present]
    if not present:
        return Check("记忆数据", True, f"{pending}还没有记忆文件（第一次写入时创建），写锁可用")
    read = f"{'、'.join(present)} {'都' if len(present) > 1 else ''}能完整读取，写锁可用"
    later = f"（{'、'.join(absent)} 还没有，第一次用到时创建）" if absent else ""
    return Check("记忆数据", True, f"{pending}{read}{later}{counts}{_torn_note(paths)}")


def _torn_note(paths: DataPaths) -> str:
    """Torn lines of killed writers, moved aside: never acknowledged, kept for the user to look at."""
    try:
        count = paths.torn_lines.read_bytes().count(b"\n")
    except OSError:
        return ""
    if not count:
        return ""
    return f"；{count} 行被中断的写入残行（从未写入成功）已原样移到 {paths.torn_lines.name}，可查看后删除"


def check_model(paths: DataPaths) -> Check:
    from memself.config import load_config
    from memself.model.cache import status
    from memself.model.catalog import resolve_model

    model = load_config(paths).model
    try:
        settings = resolve_model(model)
    except MemselfError as exc:
        return Check("向量模型", False, str(exc), "memself config model multilingual-e5-small")
    info = status(model, settings)
    if info["prepared"]:
        size = f"{info['size_bytes'] / 1e6:.0f} MB"
        return Check("向量模型", True, f"{model}（已准备：{info['folder']}，{size}）")
    if settings.kind == "local" and not Path(settings.source).is_dir():
        return Check(
            "向量模型",
            False,
            f"本地模型文件夹 {settings.source} 不存在",
            "memself config model <模型文件夹或 hub id>",
        )
    fix = "memself model prepare"
    if settings.kind == "hub":
        fix += (
            "（连不上模型仓库时设置 HF_ENDPOINT 镜像，"
            "或 memself config model multilingual-e5-small 改用离线模型）"
        )
    return Check("向量模型", False, f"{model} {info['reason']}", fix)


def check_recall_lines(paths: DataPaths) -> Check:
    """The recall floors in effect for the configured model, and where each comes from."""
    from memself.config import (
        LINE_KEYS,
        LINE_SOURCES,
        ORIGINAL_LINES_MODEL,
        load_config,
    )
    from memself.model.catalog import resolve_model
    from memself.recall.lines import recall_lines, show_line

    config = load_config(paths)
    try:
        settings = resolve_model(config.model)
    except MemselfError as exc:
        return Check("召回线", False, str(exc), "memself config model multilingual-e5-small")
    lines = recall_lines(config, settings)
    shown = "，".join(
        f"{group} {show_line(line.value)}（{LINE_SOURCES[line.source]}）" for group, line in lines.items()
    )
    summary = f"{config.model} 的召回线：{shown}"
    pinned = [key for key in LINE_KEYS if config.is_set(key)]
    if pinned and settings.model_id != ORIGINAL_LINES_MODEL:
        values = "、".join(f"{key} {show_line(float(config.values[key]))}" for key in pinned)
        summary += f"；config.json 里原插件的 {values} 只用于 {ORIGINAL_LINES_MODEL}，不用于当前模型"
    if any(line.source == "default" for line in lines.values()):
        return Check(
            "召回线",
            None,
            summary,
            "memself verify 按你的用例检查，再用 memself config recallMinScore <值> 设定这个模型的线",
        )
    return Check("召回线", True, summary)


def check_original_vectors(paths: DataPaths) -> Check | None:
    """The original's ``embeddings.jsonl``, which memself imports once and never writes: does it
    still describe the memories it has vectors for? Only when the file is there."""
    from datetime import datetime, timezone

    from memself.store.memory_store import MemoryStore
    from memself.timeutil import parse_iso

    path = paths.legacy_embeddings
    try:
        written = datetime.fromtimestamp(path.stat().st_mtime, tz=timezone.utc)
    except OSError:
        return None
    ids = _vector_ids(path)
    try:
        memories = MemoryStore(paths).all()
    except MemselfError:
        return None  # the data check reports it
    stale = [m for m in memories if m.id in ids and (parse_iso(m.textChangedAt) or written) > written]
    name = "原插件的向量文件"
    if not stale:
        return Check(name, True, f"{path} 与记忆正文一致（只在回到原插件时用到，memself 不读写它）")
    when = written.astimezone().strftime("%Y-%m-%d %H:%M")
    return Check(
        name,
        None,
        f"{path} 写于 {when}，之后 memself 合并或改写了其中 {len(stale)} 条记忆的正文"
        "（memself 自己的索引已更新）；回到原插件后，这几条会按旧的意思召回",
        "只在回到原插件时需要：在原插件目录运行 npm run rebuild-index（它先备份旧文件，再按当前正文"
        "重算全部向量），然后重启各客户端",
    )


def _vector_ids(path: Path) -> set[str]:
    """The memory ids ``embeddings.jsonl`` has a vector for (lines that do not parse are skipped)."""
    import json

    ids: set[str] = set()
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            for line in handle:
                try:
                    raw = json.loads(line)
                except ValueError:
                    continue
                if isinstance(raw, dict) and isinstance(raw.get("id"), str):
                    ids.add(raw["id"])
    except OSError:
        pass
    return ids


def check_engine(paths: DataPaths, wait_s: float = _ENGINE_WAIT_S) -> Check:
    from memself.engine.client import engine_status, ensure_started

    try:
        spawns = 0
        deadline = time.monotonic() + wait_s
        next_nudge = 0.0
        while True:
            status = engine_status(paths)
            if status and (status.get("ready") or status.get("error")):
                break
            now = time.monotonic()
            if status is None and now >= next_nudge:
                # "spawned" again means the engine we started has died on start-up.
                if ensure_started(paths) == "spawned":
                    spawns += 1
                    if spawns > 2:
                        return Check(
                            "召回进程",
                            False,
                            "启动后立即退出" + _last_engine_error(paths),
                            "memself engine serve 在前台运行以查看错误",
                        )
                next_nudge = now + 3.0
            if now > deadline:
                return Check(
                    "召回进程",
                    False,
                    f"{wait_s:g} 秒内没有就绪",
                    "memself engine status 查看详情；memself.log 里有启动错误",
                )
            time.sleep(0.2)
    except (MemselfError, OSError) as exc:
        return Check("召回进程", False, f"无法启动：{exc}", "memself engine serve 在前台运行以查看错误")
    if status.get("error"):
        return Check(
            "召回进程",
            False,
            f"加载模型失败：{status['error']}",
            "按上面的提示处理模型后运行 memself engine stop",
        )
    warm = status.get("warm_up_s")
    started = "本次检查启动了它，" if spawns else ""
    detail = f"运行中（{started}pid {status.get('pid')}，{status.get('transport', '')}"
    detail += f"，预热 {warm:.1f} 秒）" if isinstance(warm, (int, float)) else "）"
    service = status.get("service")
    backlog = service.get("backlog") if isinstance(service, dict) else None
    if isinstance(backlog, dict):
        detail += f"；后台编码：{backlog_progress(backlog)}"
    problem = service.get("model_problem") if isinstance(service, dict) else None
    if isinstance(problem, dict):
        found, serving, fix = model_problem_lines(problem)
        return Check("召回进程", False, f"{detail}；{found}；{serving}", fix.removeprefix("修复："))
    if status.get("reload_error"):
        return Check(
            "召回进程",
            False,
            f"{detail}；{reload_failed_line(str(status['reload_error']))}",
            "按「记忆数据」一项和 memself.log 修好数据文件；或运行 memself engine stop，下次使用时重新启动",
        )
    return Check("召回进程", True, detail)


def check_engine_port(paths: DataPaths) -> Check | None:
    """Only where the engine listens on loopback TCP and left a port file: a port file others
    may read (whoever reads the token can use the engine as you) is refused; a port that
    another program answers on (the engine died and its port was taken) is never sent to."""
    from memself.engine.location import locate
    from memself.engine.protocol import FrameError
    from memself.engine.transport import connect, port_file_problem

    location = locate(paths.root)
    if not os.path.exists(location.port_file):
        return None
    problem = port_file_problem(location.port_file)
    if problem:
        return Check(
            "引擎端口文件",
            False,
            f"{problem}，已拒绝使用：读到其中口令的人可以冒用你的召回引擎",
            f"删除 {location.port_file} 后运行 memself engine stop，再运行 memself engine start",
        )
    try:
        sock, _ = connect(location, time.monotonic() + 2.0)
    except FrameError as exc:
        if exc.message:
            return Check("引擎端口", False, exc.message, "memself engine start")
        return None  # no engine there: the engine check starts one
    sock.close()
    return None


def check_runtime_dir(paths: DataPaths) -> Check | None:
    """Only when the usual runtime directory is unusable (another user created it first, or a
    symlink sits there): say so, and where the engine listens instead."""
    from memself.engine.client import engine_status
    from memself.engine.location import dir_problem, locate

    wanted = locate(paths.root).runtime_dir
    problem = dir_problem(wanted)
    if not problem:
        return None
    fallback = (engine_status(paths) or {}).get("runtime_fallback")
    using = fallback.get("using") if isinstance(fallback, dict) else None
    where = f"召回引擎改用它自己建的私有目录 {using}" if using else "召回引擎启动时会改用它自己建的私有目录"
    return Check(
        "运行目录",
        None,
        f"{wanted} {problem}，不会使用；{where}，召回照常",
        f"让该目录的属主或 root 删除 {wanted}，然后运行 memself engine stop",
    )


def _last_engine_error(paths: DataPaths) -> str:
    try:
        lines = paths.log_file.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    for line in reversed(lines[-200:]):
        if "engine" in line and ("failed" in line or "error" in line):
            return "：" + line.split(" ", 2)[-1][:300]
    return ""


def check_judge(
    paths: DataPaths,
    chat: Callable[..., str] | None = None,
    confirm: Callable[[str], bool] | None = None,
) -> Check:
    """The judge's endpoint, with one real request once the key may go there.

    A key in the original's format is bound to the configured address only when ``confirm``
    (a question at the user's terminal, shown the address) says yes; without a terminal
    (``confirm`` None) nothing is bound and nothing is sent."""
    from memself.config import load_config
    from memself.errors import KeyEndpointMismatch, KeyUnconfirmed
    from memself.judge.credentials import bind_key, key_for_endpoint, read_key_file, shown_base

    cfg = load_config(paths)
    if cfg.side_judge is False:
        return Check(
            "旁路判别",
            False,
            "配置还停在已移除的阻塞模式（sideJudge=false），不会沉淀新记忆",
            "memself setup sidepath",
        )
    found = read_key_file(paths)
    if found.state == "invalid":
        return Check(
            "旁路判别",
            False,
            f"接口密钥文件 {paths.side_secret} {found.problem}，不会沉淀新记忆（已有记忆照常注入和召回）",
            "memself key set 重新输入 apiKey",
        )
    missing = [
        name
        for name, value in (
            ("sideApiBase", cfg.sideApiBase),
            ("sideApiModel", cfg.sideApiModel),
            ("apiKey", found.key),
        )
        if not value
    ]
    if missing:
        # A supported state (the README's "没配齐接口时"): recall works, nothing new is learnt.
        return Check(
            "旁路判别",
            None,
            f"接口没配齐（缺 {'、'.join(missing)}），已有记忆照常注入和召回，但不会沉淀新记忆",
            "memself setup，或 memself config sideApiBase/sideApiModel 后运行 memself key set",
        )
    base = str(cfg.sideApiBase)
    if found.state == "ok" and not found.bound_base:
        if confirm is None or not confirm(shown_base(base)):
            return Check(
                "旁路判别",
                False,
                f"apiKey 是原插件格式，还没有确认可以发往哪个地址（sideApiBase 现在是 {shown_base(base)}）；"
                "为防密钥外泄，记忆沉淀已暂停，本次检查也没有发送请求",
                "在终端运行 memself doctor，核对地址后按提示确认；或运行 memself key set 重新输入 apiKey；"
                "地址不是你填的就运行 memself setup 重新填写",
            )
        bind_key(paths, base)
    try:
        # The same gate as the judge: the key goes only to the endpoint it was entered for.
        key, bound = key_for_endpoint(paths, base)
    except KeyUnconfirmed as exc:
        return Check("旁路判别", False, str(exc), "在终端运行 memself doctor 确认地址，或 memself key set")
    except KeyEndpointMismatch:
        return Check(
            "旁路判别",
            False,
            f"apiKey 是为 {shown_base(found.bound_base)} 录入的，而 sideApiBase 现在是 "
            f"{shown_base(base)}；为防密钥外泄，记忆沉淀已暂停，本次检查也没有发送请求",
            "确认新地址可信后运行 memself key set 重新输入 apiKey；"
            "地址不是你改的就运行 memself setup 重新填写",
        )
    except (MemselfError, OSError) as exc:
        return Check("旁路判别", False, f"接口密钥不可用：{exc}", "memself key set 重新输入 apiKey")
    if chat is None:
        from memself.judge import http

        chat = http.chat
    started = time.monotonic()
    try:
        chat(bound, cfg.sideApiModel, key, "只回答 OK。", "ping", timeout=_JUDGE_TIMEOUT_S)
    except MemselfError as exc:
        text = str(exc).replace(key, "***")
        return Check(
            "旁路判别",
            False,
            f"{shown_base(bound)}（模型 {cfg.sideApiModel}）请求失败：{text}",
            "检查地址、模型名和 apiKey（memself config sideApiBase ...、memself key set）",
        )
    elapsed = time.monotonic() - started
    return Check(
        "旁路判别",
        True,
        f"{shown_base(bound)}（模型 {cfg.sideApiModel}，apiKey 已配置、"
        f"只发往这个地址、不显示）真实请求成功，用时 {elapsed:.1f} 秒",
    )


def check_views(paths: DataPaths) -> Check | None:
    """How many memories lack "applies when" requests, and what that costs in recall."""
    from datetime import datetime, timezone

    from memself.config import load_config
    from memself.views.status import cost_text, coverage

    config = load_config(paths)
    cov = coverage(paths, config, datetime.now(timezone.utc))
    if not cov.active:
        return None
    if not cov.waiting:
        return Check("适用场景", True, f"{cov.active} 条可召回的记忆都有适用场景")
    cost = cost_text(config.model)
    summary = f"{cov.waiting}/{cov.active} 条可召回的记忆还没有适用场景（或已过时）；{cost}"
    if not cov.endpoint:
        return Check(
            "适用场景",
            None,
            summary + "；没有配置旁路判别接口，不会补写",
            "memself setup 配置接口后，每天在后台按额度补写（memself views status 查看）",
        )
    b = cov.budget
    return Check(
        "适用场景",
        None,
        summary + f"；每天在后台按额度补写，今天已用请求 {b.requests_spent}/{b.requests_allowed} 次",
        "等待后台补写，或运行 memself views fill",
    )


def check_secrets(paths: DataPaths) -> Check:
    """The local session secret: valid, not made yet, unusable, or replaced after being invalid."""
    from memself.judge.credentials import read_session_secret, session_secret_problem, set_aside_secrets

    target = paths.session_secret
    problem = session_secret_problem(paths)
    if problem:
        return Check(
            "本地会话密钥",
            False,
            f"{target} {problem}（常见原因：写入时磁盘已满），记忆沉淀暂停",
            "腾出磁盘空间后正常提问即可：插件会把它另存为 session-secret.invalid-* "
            "并重新生成（之前未确认的记忆提案随之失效）",
        )
    aside = set_aside_secrets(paths)
    if aside:
        names = "、".join(p.name for p in aside)
        return Check(
            "本地会话密钥",
            True,
            f"曾经内容无效，已另存为 {names} 并重新生成；之前未确认的记忆提案已失效",
            f"不需要时可以删除 {names}",
        )
    if read_session_secret(paths) is None:
        return Check("本地会话密钥", None, "还没有生成（第一次判别时自动生成）")
    return Check("本地会话密钥", True, f"{target}（权限 600，不显示）")


def check_kept(paths: DataPaths) -> Check | None:
    """Rules the answers broke again and again: advice to reword them (never deleted)."""
    from memself.kept.counts import BROKEN, advice, count
    from memself.store.memory_store import MemoryStore
    from memself.store.records import one_line

    if not paths.root.is_dir():
        return None
    flagged = [m for m in MemoryStore(paths).active("rule") if advice(m)]
    if not flagged:
        return None
    flagged.sort(key=lambda m: count(m, BROKEN), reverse=True)
    named = "；".join(f"「{one_line(m.text)[:40]}」（{count(m, BROKEN)} 次，id {m.id}）" for m in flagged[:5])
    return Check(
        "规则遵守",
        None,
        f"{len(flagged)} 条规则{advice(flagged[0])}：{named}",
        "在对话里让助手把这条规则改写得更具体，或 memself rule add 一条新的说法后 memself delete 旧的 id",
    )


def check_sync(paths: DataPaths) -> Check | None:
    """The last sync and the changes waiting for the next one, when sync is set up."""
    from dataclasses import asdict

    from memself.sync.run import configured, status
    from memself.text.messages import sync_state_lines

    if not configured(paths):
        return None
    info, pending = status(paths)
    lines = sync_state_lines(info, asdict(pending))
    failed = bool(info.get("lastError"))
    fix = "检查网络和同步仓库地址后运行 memself sync" if failed else ""
    if not fix and pending.total:
        fix = "下次会话开始时会在后台同步，也可以现在运行 memself sync"
    return Check("同步", None if failed else True, f"{info.get('remote')}；" + "；".join(lines), fix)


def run_checks(
    paths: DataPaths,
    home: Path,
    *,
    engine_wait_s: float = _ENGINE_WAIT_S,
    chat: Callable[..., str] | None = None,
    confirm: Callable[[str], bool] | None = None,
) -> list[Check]:
    ctx = context_for(home, skill_source=default_skill_source())
    checks = [check_install(paths)]
    checks += [check_host(name, ctx) for name in INSTALLERS]
    later: tuple[Callable[[], Check | None], ...] = (
        lambda: check_data(paths),
        lambda: check_original_vectors(paths),
        lambda: check_model(paths),
        lambda: check_recall_lines(paths),
        lambda: check_engine_port(paths),
        lambda: check_engine(paths, engine_wait_s),
        lambda: check_runtime_dir(paths),
        lambda: check_judge(paths, chat, confirm),
        lambda: check_views(paths),
        lambda: check_kept(paths),
        lambda: check_secrets(paths),
        lambda: check_sync(paths),
    )
    for check in later:
        try:
            result = check()
        except Exception as exc:
            result = Check("检查出错", False, f"{type(exc).__name__}: {exc}")
        if result is not None:
            checks.append(result)
    return checks


def is_warning(check: Check) -> bool:
    return check.ok is None and bool(check.fix)


def render(checks: list[Check], echo: Echo) -> None:
    for check in checks:
        mark = "⚠" if is_warning(check) else {True: "✓", False: "✗", None: "-"}[check.ok]
        echo(f"{mark} {check.name}：{check.summary}")
        if check.fix:
            echo(f"    {'修复' if check.ok is False else '建议'}：{check.fix}")
    problems = sum(1 for c in checks if c.ok is False)
    warnings = sum(1 for c in checks if is_warning(c))
    noted = f"另有 {warnings} 条提醒（⚠），不影响使用，见上面的「建议」。" if warnings else ""
    if problems:
        echo(f"发现 {problems} 个问题，按上面的「修复」处理。{noted}")
    else:
        echo(f"没有故障。{noted}" if noted else "一切正常。")


def run_doctor(
    echo: Echo,
    *,
    paths: DataPaths | None = None,
    home: Path | None = None,
    confirm: Callable[[str], bool] | None = None,
) -> int:
    """``confirm``: the question that binds a key in the original's format to the configured
    address (asked at a terminal only; None: never bound here)."""
    checks = run_checks(paths or DataPaths.default(), home or Path.home(), confirm=confirm)
    render(checks, echo)
    return 1 if any(c.ok is False for c in checks) else 0
