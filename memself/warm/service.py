"""The recall service the warm engine hosts: the model, the background mean and the vector index,
and the server half of the hook's fast path.

Ops (declared in ``memself.engine.protocol``):
- ``recall`` {text, now, workspace}: per-group gated recall of active memories, with each hit's
  confidence as it will be after its reward; nothing is rewarded: the caller rewards what reached
  the host.
- ``nearest`` {text, k, workspace}: the k nearest active memories, ungated, no rewards (the
  judge's dedup).
- ``preview`` {text, workspace}: what ``text`` would recall, with the gate's explanation, no
  rewards (``memself recall``).
``workspace``, a workspace key, limits each to the global memories and that workspace's ("": the
global ones only); without it every memory counts.
- ``hook-forward`` {host, stdin, env, home, started, utcoffset, zone}: a whole session-start or
  prompt hook from the raw stdin the hook process read (``memself.hook.process``), run here by
  ``memself.hook.run`` with the engine's recall and store, so that the hook process imports
  almost nothing. Its recalled memories are rewarded only when the hook process confirms it wrote
  the answer to the host (``take_deferred``): a hook that gave up waiting rewards nothing.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memself.config import load_config
from memself.engine.protocol import OP_HOOK_FORWARD, OP_NEAREST, OP_PREVIEW, OP_RECALL, OP_SIMILARITY
from memself.errors import InvalidInput
from memself.logs import log
from memself.paths import DataPaths
from memself.store.memory_store import MemoryStore, WriteSession
from memself.store.records import GROUPS, Memory
from memself.timeutil import parse_iso

if TYPE_CHECKING:
    from memself.hook.run import Handler, RewardSink
    from memself.hosts.base import HookEvent, HookReply
    from memself.index.sync import VectorIndex
    from memself.model.encoder import Encoder
    from memself.recall.gate import GateParams
    from memself.recall.memory_side import MemorySideEncoder
    from memself.recall.pool import RecallPool
    from memself.recall.scoring import Recaller
    from memself.warm.backlog import Backlog

# Scored once at warm-up (no reward, nothing written): it builds what the first real prompt
# would otherwise build while the host waits, Chinese runs and identifiers included.
WARM_UP_PROMPT = "帮我看下 payment-service 的灰度开关配置，上线前要检查什么"
# At most this many memories without a vector are encoded before a reload returns (a memory just
# added is searchable at once); more go to the background backlog.
INLINE_ENCODE = 64
# With more than that waiting, the newest this many rows are still encoded before the reload
# returns (an engine starts "ready" only after it): a memory added while the engine was down is
# recalled on the first prompt however long the backlog behind it. One encoder call's worth.
INLINE_NEWEST = 8
# Repositories whose team memories stay encoded (the oldest is dropped for a new one).
TEAM_CACHE = 8


def make_service(paths: DataPaths) -> RecallService:
    return RecallService(paths)


class RecallService:
    def __init__(self, paths: DataPaths) -> None:
        self.paths = paths
        self.store = CachedReadStore(paths)
        self.model = ""  # the model served: config.json's, or the index's when that one fails
        # Set while config.json names a model that could not be loaded (``model_problem``), and
        # the (model, config.json stamp) that failed: that file is not tried again until it changes.
        self.problem: dict[str, str] | None = None
        self._failed: tuple[str, object] | None = None
        # None until warm_up has loaded them; the engine sends no op before warm_up returned, but
        # ``describe`` (the status op) may come first.
        self.encoder: Encoder | None = None
        self.memory_encoder: MemorySideEncoder | None = None
        self.recaller: Recaller | None = None
        self.index: VectorIndex | None = None
        self.memories: dict[str, Memory] = {}
        self.pool: RecallPool | None = None  # the indexed memories
        # The reward of the hook just answered, until the engine learns whether it was delivered.
        self._deferred: Callable[[], None] | None = None
        # Guards what ops read (memories, pool, index): the backlog's thread swaps them too.
        self._lock = threading.RLock()
        self._backlog: Backlog | None = None
        self._store_stamps: tuple[object, ...] = ()
        # Per repository: its team files' stamps, and its pool, vectors and matrix key (or None).
        self._team: dict[str, tuple[tuple[object, ...], tuple[RecallPool, Any, object] | None]] = {}
        self.store.on_patched = self._own_write

    # ----- lifecycle (called by the engine) -----

    def warm_up(self) -> None:
        """Load everything the first prompt touches, so that "ready" means a prompt gets full
        recall at once: the model, the recall space, the index, the memories, the lexical
        tables and postings (built on a throwaway scoring) and the hook path's own modules."""
        from memself.recall.memory_side import indexed_model

        config_stamp = _file_stamp(self.paths.config)  # before the read: a later edit is tried
        wanted = load_config(self.paths).model
        try:
            self._load_model(wanted)
        except Exception as exc:
            # The index's own model, with its own lines, rather than no recall at all; with no
            # usable one the warm-up fails and says why.
            fallback = indexed_model(self.paths.index_dir)
            if not fallback or fallback == wanted:
                raise
            try:
                self._load_model(fallback)
            except Exception:
                raise exc from None
            self._model_failed(wanted, exc, config_stamp)
        self.reload()
        self._prime()

    def _prime(self) -> None:
        import memself.hook.core
        import memself.hook.run
        import memself.hosts
        import memself.judge.start  # noqa: F401  (what a prompt hook imports in the engine)
        from memself.text.input_filter import classify_input

        classify_input(WARM_UP_PROMPT)
        recaller, pool, index = self._loaded()
        recaller.encoder.encode_queries([WARM_UP_PROMPT])
        if recaller.scoring.uses_lexical:
            from memself.recall import lexical

            lexical.warm_up()
        recaller.score(WARM_UP_PROMPT, pool, index.matrix, matrix_key=index.generation)

    def _load_model(self, model: str) -> tuple[MemorySideEncoder, VectorIndex]:
        """Load ``model`` whole, then switch to it: a failure leaves the served model as it was."""
        from memself.index.sync import VectorIndex
        from memself.model.encoder import load_encoder
        from memself.recall.memory_side import memory_side
        from memself.recall.scoring import load_recaller

        # A model not prepared yet is prepared in a child process; the engine's stderr goes
        # nowhere, so the log says why this start is slow.
        encoder = load_encoder(model, notify=lambda _msg: log(self.paths, "model-prepare", model=model))
        memory_encoder = memory_side(encoder)
        recaller = load_recaller(encoder, model)
        index = VectorIndex.for_paths(self.paths)
        self.encoder, self.memory_encoder, self.recaller = encoder, memory_encoder, recaller
        self.index, self.model = index, model
        return memory_encoder, index

    def _model_failed(self, wanted: str, exc: BaseException, config_stamp: object) -> None:
        """Keep serving ``self.model`` and remember why ``wanted`` (named by the config.json of
        ``config_stamp``) is not served."""
        reason = " ".join(str(exc).split()) or type(exc).__name__
        self.problem = {"wanted": wanted, "serving": self.model, "reason": reason[:500]}
        self._failed = (wanted, config_stamp)
        log(self.paths, "engine-model-failed", wanted=wanted, serving=self.model, error=reason[:300])

    def _model_to_serve(self, configured: str, config_stamp: object) -> str:
        """``configured``, unless it already failed for this very config.json (trying again on
        every memory change would only fail again): then the model served now."""
        if configured == self.model:
            self.problem, self._failed = None, None
        elif self._failed == (configured, config_stamp):
            return self.model
        return configured

    def reload(self) -> None:
        """Re-read memories; encode a few new or changed ones now and hand a larger number (a
        model change re-encodes everything) to the backlog, serving the encoded ones meanwhile."""
        from memself.recall.pool import indexed_pool

        with self._lock:
            config_stamp = _file_stamp(self.paths.config)  # before the read: a later edit is tried
            configured = load_config(self.paths).model
            wanted = self._model_to_serve(configured, config_stamp)
            stamps = self._stamps()
            if (
                wanted == self.model
                and self.index is not None
                and stamps == self._store_stamps
                and self._index_current(self.index)
            ):
                return  # only the backlog's own index write changed: it publishes that itself
            if wanted != self.model or self.memory_encoder is None or self.index is None:
                try:
                    memory_encoder, index = self._load_model(wanted)
                except Exception as exc:
                    if self.memory_encoder is None or self.index is None:
                        raise
                    # The index still holds the served model's vectors: keep serving them.
                    self._model_failed(wanted, exc, config_stamp)
                    memory_encoder, index = self.memory_encoder, self.index
                else:
                    self._model_to_serve(configured, config_stamp)  # loaded: no problem left
            else:
                memory_encoder, index = self.memory_encoder, self.index
            memories = self.store.all()
            self.memories = {m.id: m for m in memories}
            self._store_stamps = stamps
            backlog = self._backlog_of()
            with backlog.write_lock:
                plan = index.plan(memories, memory_encoder)
                busy = backlog.known()
                new = [item for item in plan.todo if item[0] not in busy]
                # plan.todo is newest first: the few taken here are the ones most likely asked about.
                inline = new if len(new) <= INLINE_ENCODE else new[:INLINE_NEWEST]
                fresh = index.encode(inline, memory_encoder, plan.result) if inline else {}
                result = index.commit(plan, memory_encoder, fresh)
                backlog.assign(plan, memory_encoder, leave_out={item[0] for item in inline})
            if result.failed:
                log(self.paths, "index-encode-failed", count=len(result.failed))
            if len(plan.todo) > len(inline):
                log(self.paths, "index-backlog", count=len(plan.todo) - len(inline), indexed=len(index))
            # Matched once per reload: memories and index rows change nowhere else, and matching
            # them is a Python loop over every memory that prompts need not pay.
            self.pool = indexed_pool(list(self.memories.values()), index)

    def _own_write(self, group: str, before: object, after: object) -> None:
        """A write of this engine's (a recall reward) changed only fields recall does not score,
        and the cached memories already carry it: the version read at the last reload moves on,
        so the next prompt does not re-read and re-match every memory."""
        stamps = list(self._store_stamps)
        index = GROUPS.index(group)
        if len(stamps) == len(GROUPS) and stamps[index] == before:
            stamps[index] = after
            self._store_stamps = tuple(stamps)

    def _stamps(self) -> tuple[object, ...]:
        return tuple(_file_stamp(self.paths.group_file(group)) for group in GROUPS)

    def _index_current(self, index: VectorIndex) -> bool:
        """Whether the index on disk is the one loaded, or the backlog's latest (on its way)."""
        from memself.index.files import header_generation

        disk = header_generation(index.directory)
        return bool(disk) and disk in (index.generation, self._backlog_of().last_written)

    def _backlog_of(self) -> Backlog:
        from memself.warm.backlog import Backlog

        if self._backlog is None:
            self._backlog = Backlog(self.paths, self._publish)
        return self._backlog

    def _publish(self, writer: VectorIndex) -> None:
        """Serve the rows the backlog just wrote (on the backlog's thread): the pool is rebuilt
        and scored once off the request path, then swapped in between requests."""
        from memself.index.files import header_generation
        from memself.recall.pool import indexed_pool

        with self._lock:
            memories, encoder = self.memories, self.memory_encoder
        if encoder is None or writer.model_id != encoder.model_id:
            return
        pool = indexed_pool(list(memories.values()), writer)  # the writer is this thread's own
        with self._lock:
            index = self.index
            if index is None or memories is not self.memories or encoder is not self.memory_encoder:
                return  # reloaded meanwhile: that reload built its own pool
            if header_generation(index.directory) != writer.generation:
                return  # written over since (a reload or another process): the next reload reads it
            index.adopt(writer)
            self.pool = pool
            self._prime_pool()

    def _prime_pool(self) -> None:
        """Build the new pool's lexical postings and row norms now, not on the next prompt."""
        if self.recaller is None or self.pool is None or self.index is None:
            return
        index = self.index
        self.recaller.score(WARM_UP_PROMPT, self.pool, index.matrix, matrix_key=index.generation)

    def close(self) -> None:
        """Stop the backlog's thread (what it has not written is encoded again next time) and a
        model preparation the warm-up is waiting for (the next start prepares again)."""
        from memself.model.prepare_child import stop_preparations

        stopped = stop_preparations()
        if stopped:
            log(self.paths, "model-prepare-stopped", pids=stopped)
        if self._backlog is not None:
            self._backlog.close()

    def _loaded(self) -> tuple[Recaller, RecallPool, VectorIndex]:
        """What every op scores with, which warm_up loads before the engine sends any op."""
        if self.recaller is None or self.pool is None or self.index is None:
            raise RuntimeError("the recall service was used before warm_up")
        return self.recaller, self.pool, self.index

    def describe(self) -> dict[str, Any]:
        from memself.model.runtime import heavy_modules_loaded

        prepared = getattr(self.encoder, "prepared", None)
        return {
            **self.progress(),
            "model": self.model,
            "model_problem": self.problem,
            "memories": len(self.memories),
            "indexed": len(self.index) if self.index is not None else 0,
            "encoder": type(self.encoder).__name__,
            "prepared": str(prepared.folder) if prepared is not None else None,
            # What the runtime must never load (torch and friends); a test asserts it is empty.
            "heavy_modules": heavy_modules_loaded(),
        }

    def progress(self) -> dict[str, Any]:
        """Lock-free: ``backlog``, the memories still waiting for a vector, encoded in the
        background (done, total, rate_per_s, eta_s), or None when there are none."""
        backlog = self._backlog
        return {"backlog": backlog.progress() if backlog is not None else None}

    # ----- ops -----

    def handle(self, op: str, payload: dict[str, Any]) -> dict[str, Any]:
        """One op; the backlog starts no chunk until it is answered."""
        with self._backlog_of().serving(), self._lock:
            return self._handle(op, payload)

    def _handle(self, op: str, payload: dict[str, Any]) -> dict[str, Any]:
        text, workspace = str(payload.get("text", "")), _workspace(payload)
        if op == OP_RECALL:
            return self.recall(text, _now(payload), workspace)
        if op == OP_PREVIEW:
            return self.preview(text, workspace)
        if op == OP_NEAREST:
            nearest = self.nearest(text, int(payload.get("k", 3)), workspace)
            return {"items": [{"id": m.id, "score": s} for m, s in nearest]}
        if op == OP_SIMILARITY:
            return {"best": self.similarity(payload.get("facts"), payload.get("sentences"))}
        if op == OP_HOOK_FORWARD:
            return run_forwarded(payload, self.paths, self.hook_core, rewards_to=self.defer_rewards)
        raise InvalidInput(f"召回引擎不支持的操作「{op}」")

    def nearest(self, text: str, k: int, workspace: str | None = None) -> list[tuple[Memory, float]]:
        """The k nearest active memories, ungated and unrewarded (the judge's dedup)."""
        recaller, pool, index = self._loaded()
        return recaller.top_k(text, pool, index.matrix, k, matrix_key=index.generation, workspace=workspace)

    def similarity(self, facts: object, sentences: object) -> list[float]:
        """Per fact, its highest cosine with any of the sentences (``memself.kept.used``)."""
        from memself.kept.similarity import best_cosines, text_list

        recaller, _, _ = self._loaded()
        if self.encoder is None:  # pragma: no cover - _loaded checked it
            raise RuntimeError("the recall service was used before warm_up")
        return best_cosines(self.encoder, text_list(facts), text_list(sentences), recaller.space)

    def preview(self, text: str, workspace: str | None = None) -> dict[str, Any]:
        """What ``text`` would recall, with each group's line, and no reward."""
        params = self._gate_params()
        recaller, pool, index = self._loaded()
        result = recaller.recall(
            text, pool, index.matrix, params, matrix_key=index.generation, workspace=workspace
        )
        team = self._team_pool(workspace) if workspace else None
        if team is not None:
            team_pool, matrix, key = team
            found = recaller.recall(text, team_pool, matrix, params, matrix_key=key, workspace=workspace)
            result = result.with_team(found, params.top_k)
        detail = result.to_detail()
        if self.problem is not None:
            detail["model_problem"] = dict(self.problem)
        return detail

    def _gate_params(self) -> GateParams:
        """The served model's lines: its vectors are what is scored, whatever config.json names."""
        from memself.model.catalog import resolve_model
        from memself.recall.lines import gate_params

        config = load_config(self.paths)
        return gate_params(config, resolve_model(self.model or config.model))

    def recall(self, text: str, now: datetime, workspace: str | None = None) -> dict[str, Any]:
        """Gated per-group recall. Each hit shows the confidence it will have once rewarded (once
        per memory per day); the reward itself is the caller's, for text that reached the host."""
        params = self._gate_params()
        recaller, pool, index = self._loaded()
        result: dict[str, Any] = recaller.recall(
            text, pool, index.matrix, params, matrix_key=index.generation, workspace=workspace
        ).to_json()
        team = self._team_pool(workspace) if workspace else None
        if team is not None:
            # The repository's own memories, gated on their own and listed with the rest.
            team_pool, matrix, key = team
            found = recaller.recall(text, team_pool, matrix, params, matrix_key=key, workspace=workspace)
            for group, hits in found.to_json().items():
                merged = sorted([*result[group], *hits], key=lambda h: -float(h["score"]))
                result[group] = merged[: max(params.top_k, len(result[group]))]
        gains = self.store.recall_gains([h["id"] for g in GROUPS for h in result[g]], now)
        for hits in result.values():
            for hit in hits:
                hit["confidence"] = round(hit["confidence"] + gains.get(hit["id"], 0.0), 10)
        if self.problem is not None:
            # The hook tells the user (``memself.text.messages.model_notice``).
            result["model_problem"] = {k: self.problem[k] for k in ("wanted", "serving")}
        return result

    def _team_pool(self, workspace: str) -> tuple[RecallPool, Any, object] | None:
        """The memories the repository at ``workspace`` carries (``memself.store.team``) with
        their vectors, encoded again only when one of its files changed; None when it carries
        none."""
        from memself.recall.pool import RecallPool
        from memself.store.team import TEAM_DIR, team_memories

        stamps = tuple(_file_stamp(os.path.join(workspace, TEAM_DIR, f"{g}.jsonl")) for g in GROUPS)
        cached = self._team.get(workspace)
        if cached is not None and cached[0] == stamps:
            return cached[1]
        found = [m for g in GROUPS for m in team_memories(workspace, g, self._report)]
        built: tuple[RecallPool, Any, object] | None = None
        if found and self.memory_encoder is not None:
            matrix = self.memory_encoder.encode_passages([m.text for m in found])
            built = (RecallPool(found), matrix, ("team", workspace, stamps))
        if len(self._team) >= TEAM_CACHE and workspace not in self._team:
            self._team.pop(next(iter(self._team)))
        self._team[workspace] = (stamps, built)
        return built

    def _report(self, event: str, **fields: object) -> None:
        log(self.paths, event, **fields)

    def hook_core(self, event: HookEvent, now: datetime, paths: DataPaths) -> HookReply:
        """The hook core as the engine runs it: its own recall, its cached store, no warming."""
        from memself.hook.core import handle

        return handle(
            event,
            now,
            paths,
            recall=self.recall,
            in_engine=True,
            store=self.store,
        )

    def defer_rewards(self, ids: tuple[str, ...], now: datetime, event: HookEvent) -> None:
        """Keep a forwarded hook's reward, and the note of what its turn was shown, for
        ``take_deferred``."""
        store = self.store
        self._deferred = lambda: _reward_delivered(store, ids, now, event)

    def take_deferred(self) -> Callable[[], None] | None:
        """What the engine runs once the client confirms the host got the reply to the op just
        handled (the reward of the memories recalled into it); None when there is nothing."""
        deferred, self._deferred = self._deferred, None
        return deferred


def _reward_delivered(store: MemoryStore, ids: tuple[str, ...], now: datetime, event: HookEvent) -> None:
    from memself.hook.run import note_shown

    store.reward_recall(ids, now)
    note_shown(store.paths, event, ids, now)


def run_forwarded(
    payload: Mapping[str, Any],
    paths: DataPaths,
    core: Handler,
    *,
    rewards_to: RewardSink | None = None,
) -> dict[str, Any]:
    """The server half of the hook's fast path: the whole hook for the stdin a hook process
    forwarded, with that process's environment subset, home and clock, and ``core`` (the
    engine's ``hook_core``; a scripted one in tests). ``rewards_to`` gets the ids recalled into
    the answer (None: they are not rewarded); only the hook process knows whether the answer
    reached the host.

    ``{"stdoutHex": <what the hook prints, as hex>}``, or ``{"local": True}`` for what must run in
    the hook process: anything but a well-formed session start or prompt (Stop may wait seconds
    for judge jobs; bad input is logged there as before).
    """
    import io
    from pathlib import Path

    from memself.hook.inputs import Stdin
    from memself.hook.run import FIXED_NOW_ENV, RunContext, no_lone_surrogates, now_from_env, run

    env = no_lone_surrogates({str(k): str(v) for k, v in dict(payload.get("env") or {}).items()})
    try:
        raw = bytes.fromhex(str(payload.get("stdinHex", "")))
    except ValueError:
        raw = b""  # not what the hook process sends: the run reports an empty payload
    started_wall = float(payload.get("started", time.time()))
    out = io.BytesIO()
    context = RunContext(
        host=str(payload.get("host", "")),
        core=core,
        paths=paths,
        env=env,
        home=Path(str(payload.get("home") or Path.home())),
        # The hook process's fixed clock, else this instant in its time zone (the engine may
        # have been started with another TZ).
        now=now_from_env(env) if env.get(FIXED_NOW_ENV, "").strip() else _zoned_now(payload),
        stdout=out,
        spent_s=max(0.0, time.time() - started_wall),
        in_engine=True,
        rewards_to=rewards_to or _no_reward,
    )
    if not run(Stdin(raw), context):
        return {"local": True}
    return {"stdoutHex": out.getvalue().hex()}


def _no_reward(ids: tuple[str, ...], now: datetime, event: HookEvent) -> None:
    """Answers the engine serves without a way to learn they were delivered earn nothing."""


def _zoned_now(payload: Mapping[str, Any]) -> datetime:
    """This instant in the time zone the hook process reported (``utcoffset``, ``zone``)."""
    from datetime import timedelta, timezone

    name = str(payload.get("zone") or "")
    try:
        offset = timedelta(seconds=int(payload.get("utcoffset", 0)))
        zone = timezone(offset, name) if name else timezone(offset)
    except (TypeError, ValueError):
        return datetime.now().astimezone()
    return datetime.now(zone)


class CachedReadStore(MemoryStore):
    """The store with its lock-free reads parsed once per version of each group file.

    Every prompt checks whether a recall reward is due and every session start lists the rules;
    both read a whole group file, and parsing a large one on every prompt is a visible share of it.
    A version is the file's (mtime_ns, size, inode): writers replace the file atomically, so any
    write gives a new stamp. Writes (``_writing``) still load from disk under the lock.
    The cached ``Memory`` objects are shared between calls: callers must treat them as read-only
    (the engine's readers do; writers work on their own copies).
    """

    def __init__(self, paths: DataPaths) -> None:
        super().__init__(paths)
        self._groups: dict[str, tuple[tuple[int, int, int], list[Memory]]] = {}
        # Told (group, version before, version after) when a write of this process was applied to
        # the cached memories instead of dropping them.
        self.on_patched: Callable[[str, object, object], None] | None = None
        # Per group, the version an id table was built for, and the table (first line wins).
        self._tables: dict[str, tuple[tuple[int, int, int] | None, dict[str, Memory]]] = {}

    def _committed(self, session: WriteSession) -> None:
        """Under the write lock, right after a write of this process: when it only rewrote lines
        of a group cached at the version the write started from, and changed nothing recall
        scores or filters on (text, requests, group, workspace, whether active), the new field
        values are copied onto the cached memories, which stay current; otherwise the group's
        cache is dropped and re-read on next use."""
        for group in session.changed_groups():
            cached = self._groups.pop(group, None)
            changed = session.changed_in_place(group)
            before = _as_cache_stamp(session.stamp(group))
            after = _file_stamp(self.paths.group_file(group))
            if cached is None or changed is None or before is None or after is None or cached[0] != before:
                continue
            by_id = {m.id: m for m in cached[1]}
            pairs = [(by_id.get(m.id), m) for m in changed]
            if not all(old is not None and _same_for_recall(old, new) for old, new in pairs):
                continue
            for old, new in pairs:
                assert old is not None
                vars(old).update(vars(new))
            self._groups[group] = (after, cached[1])
            table = self._tables.get(group)
            if table is not None and table[0] == before:
                self._tables[group] = (after, table[1])  # the same memories, patched in place
            if self.on_patched is not None:
                self.on_patched(group, before, after)

    def read_group(self, group: str) -> list[Memory]:
        return list(self._current(group))

    def _current(self, group: str) -> list[Memory]:
        """The group's memories as cached for its present version (read now if it changed); the
        cache's own list: callers that keep or change it take a copy (``read_group``)."""
        stamp = _file_stamp(self.paths.group_file(group))
        cached = self._groups.get(group)
        if stamp is not None and cached is not None and cached[0] == stamp:
            return cached[1]
        # Stamped before reading: a write in between leaves a stale stamp, which the next call
        # sees as changed, never newer content cached under an older stamp.
        memories = super().read_group(group)
        if stamp is None:
            self._groups.pop(group, None)
        else:
            self._groups[group] = (stamp, memories)
        return memories

    def _by_ids(self, ids: Iterable[str]) -> dict[str, Memory]:
        # The parsed versions are at hand: no need to search the files' bytes on every prompt,
        # nor to walk every memory for the few recalled ones (an id table per version).
        wanted = list(dict.fromkeys(ids))
        found: dict[str, Memory] = {}
        for group in GROUPS:
            memories = self._current(group)  # only walked here, once per version: no copy
            cached = self._groups.get(group)
            table = self._tables.get(group)
            if cached is None or table is None or table[0] != cached[0]:
                ids_of: dict[str, Memory] = {}
                for memory in memories:
                    ids_of.setdefault(memory.id, memory)
                table = (cached[0] if cached is not None else None, ids_of)
                if cached is not None:
                    self._tables[group] = table
            for mem_id in wanted:
                if mem_id not in found and mem_id in table[1]:
                    found[mem_id] = table[1][mem_id]
        return found


def _same_for_recall(old: Memory, new: Memory) -> bool:
    return (old.text, old.appliesWhen, old.category, old.workspace, old.active) == (
        new.text,
        new.appliesWhen,
        new.category,
        new.workspace,
        new.active,
    )


def _as_cache_stamp(stamp: tuple[int, int, int] | None) -> tuple[int, int, int] | None:
    """The journal's (inode, mtime ns, size) as this cache's (mtime ns, size, inode)."""
    return None if stamp is None else (stamp[1], stamp[2], stamp[0])


def _file_stamp(path: Any) -> tuple[int, int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_mtime_ns, info.st_size, info.st_ino)


def _workspace(payload: dict[str, Any]) -> str | None:
    value = payload.get("workspace")
    return value if isinstance(value, str) else None


def _now(payload: dict[str, Any]) -> datetime:
    parsed = parse_iso(payload.get("now"), require_zone=True)
    if parsed is None:
        raise InvalidInput("召回请求缺少带时区的 now")
    return parsed
