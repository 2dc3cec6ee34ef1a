"""What the CLI's ``memself recall`` and ``memself verify`` call: load the model and the pool, run,
render. Business logic stays in ``memself.recall`` and ``memself.verify.run``; this module only wires
them to the store, the config and the vector index, and turns a ``RecallResult`` into Chinese.

Nothing here rewards a memory: ``memself recall`` shows what a prompt *would* recall.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memself.errors import InvalidInput
from memself.store.records import GROUP_SHORT_LABELS, GROUPS, fmt_confidence, one_line

if TYPE_CHECKING:
    from memself.config import Config
    from memself.paths import DataPaths
    from memself.recall.result import GroupRecall, RecallResult
    from memself.recall.scoring import Recaller
    from memself.verify.run import VerifyResult
    from memself.verify.sets import SetsResult

# A warm engine answers a preview in milliseconds; one that is busy or loading is not waited for.
ENGINE_PREVIEW_S = 2.0


def _recaller(config: Config, cache_dir: Path | None = None) -> Recaller:
    from memself.model.encoder import load_encoder
    from memself.recall.scoring import load_recaller

    encoder = load_encoder(config.model, cache_dir)
    return load_recaller(encoder, config.model, cache_dir)


def preview_recall(
    text: str,
    paths: DataPaths,
    config: Config,
    workspace: str | None = None,
    warn: Callable[[str], None] | None = None,
) -> RecallResult:
    """``memself recall``: ask the running engine, which has everything loaded; without one (or
    when it cannot answer at once) compute it here with the lean runtime. Never rewards.
    ``workspace`` scopes it as a session there is scoped (see ``local_recall``). When the model
    config.json names cannot be loaded, the index's model answers, as in the engine, and ``warn``
    is told each line of why."""
    from memself.engine.client import EngineClient, EngineRequestError
    from memself.engine.protocol import OP_PREVIEW
    from memself.recall.result import RecallResult
    from memself.text.messages import model_problem_lines

    if not text.strip():
        raise InvalidInput("要召回的文本为空")
    payload: dict[str, Any] = {"text": text}
    if workspace is not None:
        payload["workspace"] = workspace
    problem: dict[str, Any] | None = None
    try:
        detail = EngineClient(paths).request(OP_PREVIEW, payload, ENGINE_PREVIEW_S)
        result = RecallResult.from_detail(detail)
        problem = detail.get("model_problem") if isinstance(detail.get("model_problem"), dict) else None
    except EngineRequestError:
        result, problem = _local_or_index_model(text, paths, config, workspace)
    if problem is not None and warn is not None:
        for n, line in enumerate(model_problem_lines(problem)):
            warn(f"注意：{line}" if n == 0 else f"  {line}")
    return result


def _local_or_index_model(
    text: str, paths: DataPaths, config: Config, workspace: str | None
) -> tuple[RecallResult, dict[str, Any] | None]:
    """``local_recall`` with the configured model, else with the model the index belongs to
    (and what went wrong), as an engine would serve it."""
    from dataclasses import replace

    from memself.errors import MemselfError
    from memself.recall.memory_side import indexed_model

    try:
        return local_recall(text, paths, config, workspace=workspace), None
    except MemselfError as exc:
        fallback = indexed_model(paths.index_dir)
        if not fallback or fallback == config.model:
            raise
        served = replace(config, values={**config.values, "model": fallback})
        try:
            result = local_recall(text, paths, served, workspace=workspace)
        except MemselfError:
            raise exc from None
        reason = " ".join(str(exc).split())
        return result, {"wanted": config.model, "serving": fallback, "reason": reason}


def local_recall(
    text: str,
    paths: DataPaths,
    config: Config,
    cache_dir: Path | None = None,
    recaller: Recaller | None = None,
    workspace: str | None = None,
) -> RecallResult:
    """Recall for ``text`` in this process (model loaded here), over the user's store, unrewarded.

    ``workspace``: a workspace key (the global memories and that workspace's), "" (global
    memories only) or None (every memory), as the engine's ``preview`` op takes it. The vector
    index is synced first (new or changed memories are encoded), as the engine does.
    """
    from memself.index.sync import VectorIndex
    from memself.model.catalog import resolve_model
    from memself.recall.lines import gate_params
    from memself.recall.memory_side import memory_side
    from memself.recall.pool import indexed_pool
    from memself.store.memory_store import MemoryStore

    if not text.strip():
        raise InvalidInput("要召回的文本为空")
    recaller = recaller or _recaller(config, cache_dir)
    memories = MemoryStore(paths).all()
    index = VectorIndex.for_paths(paths)
    index.sync(memories, memory_side(recaller.encoder))
    params = gate_params(config, resolve_model(config.model))
    result = recaller.recall(
        text,
        indexed_pool(memories, index),
        index.matrix,
        params,
        matrix_key=index.generation,
        workspace=workspace,
    )
    if workspace:
        result = _with_team(result, recaller, params, workspace)
    return result


def _with_team(result: RecallResult, recaller: Recaller, params: Any, workspace: str) -> RecallResult:
    """The repository's ``.memself/`` memories recalled as the engine does: a pool of their own."""
    from memself.recall.memory_side import memory_side
    from memself.recall.pool import RecallPool
    from memself.store.team import team_memories

    found = [m for g in GROUPS for m in team_memories(workspace, g)]
    if not found:
        return result
    matrix = memory_side(recaller.encoder).encode_passages([m.text for m in found])
    team = recaller.recall(
        result.text, RecallPool(found), matrix, params, matrix_key=("team", workspace), workspace=workspace
    )
    return result.with_team(team, params.top_k)


def render_recall_text(result: RecallResult, workspace: str = "") -> str:
    """``memself recall`` for a person: each group's hits with scores, and the line it had to pass;
    a hit the repository at ``workspace`` carries says so."""
    lines = [f"输入：{one_line(result.text)}"]
    for group in GROUPS:
        lines.extend(_group_lines(result.groups[group], workspace))
    if not result.hit_ids:
        lines.append("这句话不会召回任何记忆。")
    lines.append("（只是预览：不给任何记忆加分）")
    return "\n".join(lines)


def _group_lines(g: GroupRecall, workspace: str = "") -> list[str]:
    name = GROUP_SHORT_LABELS[g.group]
    floor = "关闭" if g.floor < 0 else f"{g.floor:.3f}"
    head = f"【{name}】候选 {g.candidates} 条，底线 {floor}"
    if g.reason == "empty":
        return [head + "：没有可召回的记忆"]
    top1 = f"{g.top1:.3f}" if g.top1 is not None else "无"
    if g.reason == "below-floor":
        return [head + f"：最高分 {top1} 低于底线，本组不召回"]
    if g.reason == "margin":
        return [head + f"：最高分 {top1} 领先第二名不足 {g.margin:g}，本组不召回"]
    if g.reason == "top-k":
        line = "：底线和 margin 都关闭，直接取前几条"
    else:
        line = f"：本轮的线 {g.line:.3f}（取底线与 0.6 × 最高分 {top1} 中较大者）"
    out = [head + line]
    for hit in g.hits:
        lex = f"，字面 +{hit.lexical:.3f}" if hit.lexical > 0 else ""
        general = f"，通用问题 -{hit.penalty:.3f}" if hit.penalty > 0.0005 else ""
        out.append(
            f"  - {one_line(hit.text)}（相关度 {hit.score:.3f}{lex}{general}，置信度 "
            f"{fmt_confidence(hit.confidence)}，{_origin(hit.id, g.group, workspace)}，id {hit.id}）"
        )
        if hit.via:
            out.append(
                f"    经由适用场景「{one_line(hit.via)}」匹配（带适用场景的记忆要多过 {hit.offset:.3f}）"
            )
    return out


def _origin(mem_id: str, group: str, workspace: str) -> str:
    from memself.text.messages import ORIGIN_LABEL, origin_of

    return ORIGIN_LABEL + origin_of(mem_id, workspace, group)


def render_recall_json(result: RecallResult) -> dict[str, Any]:
    """``memself recall --json``: ``{"rule": [{"id","text","score","confidence"}...], "project": [...]}``."""
    return result.to_json()


def case_files(cases: Sequence[Path]) -> list[Path]:
    """The case files named: a file as it is, a folder as the ``*.json`` files in it (sorted)."""
    out: list[Path] = []
    for path in cases:
        if path.is_dir():
            found = sorted(p for p in path.glob("*.json") if p.is_file())
            if not found:
                raise InvalidInput(f"目录 {path} 里没有用例文件（*.json）")
            out += found
        elif path.is_file():
            out.append(path)
        else:
            raise InvalidInput(f"找不到用例文件 {path}")
    return out


def verify_command(
    cases: Path | Sequence[Path] | None,
    paths: DataPaths,
    config: Config,
    now: datetime,
    cache_dir: Path | None = None,
    recaller: Recaller | None = None,
    applies_when: Path | None = None,
) -> VerifyResult | SetsResult:
    """``memself verify [--cases FILE|DIR ...] [--applies-when DIR]``: the files named, or the
    original's ``verify-cases.json`` in the data directory (run against the user's active
    memories, read only). Several dev-format sets are also measured leave-one-set-out."""
    from memself.model.catalog import resolve_model
    from memself.recall.lines import gate_params
    from memself.store.memory_store import MemoryStore
    from memself.verify.cases import load_applies_when, load_cases, with_applies_when
    from memself.verify.run import run_cases
    from memself.verify.sets import run_sets

    named = [cases] if isinstance(cases, Path) else list(cases or [])
    if not named:
        if not paths.verify_cases.is_file():
            raise InvalidInput(
                f"找不到用例文件 {paths.verify_cases}：用 --cases 指定，或按原插件格式写 {paths.verify_cases}"
            )
        named = [paths.verify_cases]
    if applies_when is not None and not applies_when.is_dir():
        raise InvalidInput(f"找不到适用场景目录 {applies_when}")
    case_sets = []
    for path in case_files(named):
        case_set = load_cases(path)
        extra = applies_when / path.name if applies_when is not None else None
        if extra is not None and extra.is_file():
            case_set = with_applies_when(case_set, load_applies_when(extra))
        case_sets.append(case_set)
    recaller = recaller or _recaller(config, cache_dir)
    params = gate_params(config, resolve_model(config.model))
    if len(case_sets) > 1:
        return run_sets(case_sets, recaller, params, now, model=config.model)
    case_set = case_sets[0]
    pool = MemoryStore(paths).all() if case_set.fmt == "original" else []
    if case_set.fmt == "original" and not any(m.active for m in pool):
        raise InvalidInput("记忆库里没有可用的记忆，无法按 verify-cases.json 验证")
    return run_cases(case_set, recaller, params, now, pool, model=config.model)
