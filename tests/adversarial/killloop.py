"""Kill-loop driver: fork a real writer process, SIGKILL it at a random moment, check the data
directory, repeat. Run as ``python -m tests.adversarial.killloop KIND KILLS SEED`` with
``MEMSELF_HOME`` set; prints one JSON summary line.

One driver process imports memself (and, for ``rebuild-index``, loads the embedding model) once
and forks one child per kill, so a kill costs a fork instead of a Python start-up and a model
load. The child is an ordinary process doing what the CLI, the judge or ``memory_update`` do;
it loops until it is killed, so the kill lands anywhere in a write, including in the recovery of
the previous victim's leftovers.

After every kill the driver reads the directory the way the next memself process would and
counts: memories lost (acknowledged or seeded but gone), duplicated (one id twice across the
group files and the trash), unreadable lines or files.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

from memself.paths import DataPaths
from memself.store.lock import write_lock
from memself.store.memory_store import MemoryStore, TrashEntry, render_lines
from memself.timeutil import iso

T0 = datetime(2026, 11, 2, 12, 0, tzinfo=timezone.utc)
GROUPS = ("rule", "project")


def _record(mem_id: str, text: str, group: str) -> dict[str, Any]:
    stamp = iso(T0 - timedelta(days=3))
    return {
        "id": mem_id,
        "text": text,
        "confidence": 0.6,
        "category": group,
        "evidence": "",
        "firstSeen": stamp,
        "lastSeen": stamp,
        "deprecated": False,
        "createdAt": stamp,
    }


def _is_record(line: bytes) -> bool:
    try:
        raw = json.loads(line)
    except ValueError:
        return False
    return isinstance(raw, dict) and "id" in raw


class Scenario:
    """Seed data, a child body that loops forever, and a check run after each kill."""

    delay = (0.002, 0.12)

    def __init__(self, paths: DataPaths) -> None:
        self.paths = paths
        self.acks = paths.root.parent / "acks.txt"

    def seed(self) -> None:
        raise NotImplementedError

    def child(self, rng: random.Random) -> None:
        raise NotImplementedError

    def needs_reseed(self, state: dict[str, Any]) -> bool:
        return False

    def finish(self) -> None:
        """One uninterrupted run after the last kill (in the driver), before leftovers are counted."""

    def ack(self, line: str) -> None:
        fd = os.open(self.acks, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)

    def acked(self) -> list[str]:
        try:
            return self.acks.read_text().split()
        except FileNotFoundError:
            return []

    def write_files(self, groups: dict[str, list[dict[str, Any]]], trash: list[dict[str, Any]]) -> None:
        for group in GROUPS:
            self.paths.group_file(group).write_bytes(render_lines(groups.get(group, [])))
        self.paths.trash.write_bytes(render_lines(trash))
        self.acks.unlink(missing_ok=True)

    def read_state(self) -> dict[str, Any]:
        """What the next process sees (reads replay whatever a killed writer left), plus raw checks.

        A file that ends inside a line a killed writer tore (the kernel may stop a ``write`` part
        way once SIGKILL is pending) counts as ``torn``, not unreadable: the next writer must move
        it aside (``memself.store.torntail``), which ``run`` checks."""
        store = MemoryStore(self.paths)
        state: dict[str, Any] = {"unreadable": 0, "torn": 0}
        torn: dict[str, bytes] = {}
        for path in (self.paths.group_file("rule"), self.paths.group_file("project"), self.paths.trash):
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                continue
            cut = data.rfind(b"\n") + 1
            if cut < len(data) and not _is_record(data[cut:]):
                torn[path.name] = data[cut:]
                state["torn"] += 1
                data = data[:cut]
            for line in data.splitlines():
                if not _is_record(line):
                    state["unreadable"] += 1
        ids: list[str] = []
        for group in GROUPS:
            loaded = store.load_group(group)
            tail = torn.get(self.paths.group_file(group).name)
            state["unreadable"] += len([b for b in loaded.bad_lines if b.raw != tail])
            state[group] = [m.id for m in loaded.memories]
            ids += state[group]
        trash = store.trash_entries()
        state["trash"] = [e.memory.id for e in trash]
        ids += state["trash"]
        state["all"] = ids
        return state

    def next_writer(self) -> None:
        """What every write does first under the lock, and nothing else."""
        with write_lock(self.paths):
            MemoryStore(self.paths).prepare_write()

    def torn_kept(self) -> int:
        try:
            return self.paths.torn_lines.read_bytes().count(b"\n")
        except FileNotFoundError:
            return 0

    def count(self, state: dict[str, Any], expected: set[str]) -> tuple[int, int]:
        seen = Counter(state["all"])
        lost = len([i for i in expected if seen[i] == 0])
        duplicated = sum(n - 1 for n in seen.values() if n > 1)
        return lost, duplicated

    def check(self, state: dict[str, Any]) -> tuple[int, int]:
        raise NotImplementedError


class Add(Scenario):
    """``memself rule add`` / ``project add``: one line more, never two, never none once acknowledged."""

    def seed(self) -> None:
        self.write_files({"rule": [_record("seed-0", "种子规则正文内容", "rule")]}, [])

    def child(self, rng: random.Random) -> None:
        store = MemoryStore(self.paths)
        while True:
            group = rng.choice(GROUPS)
            memory = store.create(f"杀进程循环新增的记忆 {rng.getrandbits(40):x}", group, T0)
            self.ack(memory.id)

    def needs_reseed(self, state: dict[str, Any]) -> bool:
        return len(state["all"]) > 300

    def check(self, state: dict[str, Any]) -> tuple[int, int]:
        return self.count(state, {"seed-0", *self.acked()})


class AppendCompact(Scenario):
    """New memories appended out of order while the daily maintenance writes the files back
    sorted (compaction): every acknowledged line survives, once."""

    def seed(self) -> None:
        self.seeds = [f"c-{i:02d}" for i in range(20)]
        records = [_record(i, f"压缩前的种子事实 {i}", "project") for i in self.seeds]
        self.write_files({"project": records}, [])

    def child(self, rng: random.Random) -> None:
        from memself.maintenance import run_daily_maintenance

        store = MemoryStore(self.paths)
        while True:
            if rng.random() < 0.6:
                group = rng.choice(GROUPS)
                added = store.add(f"追加后等待压缩的记忆 {rng.getrandbits(40):x}", group, T0)
                self.ack(added.memory.id)
            else:
                # Another day each time, so the maintenance runs (and rewrites) again.
                run_daily_maintenance(self.paths, 30, T0 + timedelta(days=rng.randrange(1, 10**5)))

    def needs_reseed(self, state: dict[str, Any]) -> bool:
        return len(state["all"]) > 300

    def check(self, state: dict[str, Any]) -> tuple[int, int]:
        return self.count(state, {*self.seeds, *self.acked()})


class _Universe(Scenario):
    """A fixed set of ids that moves between the group files and the trash: each exactly once."""

    size = 40

    def __init__(self, paths: DataPaths) -> None:
        super().__init__(paths)
        self.universe = [(f"u-{i:03d}", GROUPS[i % 2]) for i in range(self.size)]

    def check(self, state: dict[str, Any]) -> tuple[int, int]:
        return self.count(state, {i for i, _ in self.universe})


class Delete(_Universe):
    """``memself delete`` and ``memory_update`` merge: group file -> trash."""

    def seed(self) -> None:
        groups: dict[str, list[dict[str, Any]]] = {g: [] for g in GROUPS}
        for mem_id, group in self.universe:
            groups[group].append(_record(mem_id, f"会被删除的记忆 {mem_id}", group))
        self.write_files(groups, [])

    def child(self, rng: random.Random) -> None:
        store = MemoryStore(self.paths)
        while True:
            present = [m for m in store.all()]
            if len(present) < 2:
                time.sleep(1)
                continue
            if rng.random() < 0.3:
                keep, drop = rng.sample(present, 2)
                store.merge_pair(keep.id, drop.id, f"合并后的正文 {rng.getrandbits(20):x}", T0)
            else:
                store.delete([rng.choice(present).id], T0)
            self.ack("op")

    def needs_reseed(self, state: dict[str, Any]) -> bool:
        return len(state["rule"]) + len(state["project"]) < 6


class Restore(_Universe):
    """``memself restore``: trash -> group file."""

    def seed(self) -> None:
        trash = [
            TrashEntry(_memory(mem_id, group), iso(T0), "user-delete").to_json()
            for mem_id, group in self.universe
        ]
        self.write_files({}, trash)

    def child(self, rng: random.Random) -> None:
        store = MemoryStore(self.paths)
        while True:
            entries = store.trash_entries()
            if not entries:
                time.sleep(1)
                continue
            store.restore(rng.choice(entries).memory.id, T0)
            self.ack("op")

    def needs_reseed(self, state: dict[str, Any]) -> bool:
        return len(state["trash"]) < 6


def _memory(mem_id: str, group: str) -> Any:
    from memself.store.records import Memory

    memory = Memory.from_json(_record(mem_id, f"回收站里的记忆 {mem_id}", group), group)
    assert memory is not None
    return memory


class JudgeApply(Scenario):
    """The side judge in no-confirm mode applying proposals: create, reinforce, merge, replace."""

    def seed(self) -> None:
        self.seeds = [f"j-{i:02d}" for i in range(20)]
        self.write_files({"rule": [_record(i, f"判别用的种子规则 {i}", "rule") for i in self.seeds]}, [])

    def child(self, rng: random.Random) -> None:
        from memself.judge.apply import apply_proposal

        store = MemoryStore(self.paths)
        day = 0
        while True:
            day += 1  # a new day each time, so reinforce and merge keep changing the file
            now = T0 + timedelta(days=day)
            action = rng.choice(("create", "reinforce", "merge", "replace"))
            target = rng.choice(self.seeds)
            proposal = {
                "text": f"判别提出的新说法 {rng.getrandbits(40):x}",
                "targetId": target,
                "mergedText": f"合并后的说法 {rng.getrandbits(40):x}",
                "evidence": "judge",
                "category": "rule",
            }
            before = {m.id for m in store.all()} if action == "create" else set()
            apply_proposal(store, proposal, action, "rule", now)
            if action == "create":
                for memory in store.all():
                    if memory.id not in before:
                        self.ack(memory.id)

    def needs_reseed(self, state: dict[str, Any]) -> bool:
        return len(state["all"]) > 200

    def check(self, state: dict[str, Any]) -> tuple[int, int]:
        return self.count(state, {*self.seeds, *self.acked()})


class RebuildIndex(Scenario):
    """``memself rebuild-index``: the index is replaced; memories and every file stay readable."""

    delay = (0.005, 0.35)

    def __init__(self, paths: DataPaths) -> None:
        super().__init__(paths)
        from memself.model.encoder import load_encoder
        from memself.recall.memory_side import memory_side

        self.encoder = memory_side(load_encoder("multilingual-e5-small"))
        self.round = 0

    def seed(self) -> None:
        self.seeds = [f"x-{i:02d}" for i in range(8)]
        self.write_files(
            {"rule": [_record(i, f"需要向量的规则 {i}，内容各不相同", "rule") for i in self.seeds]}, []
        )
        self.before = self.paths.group_file("rule").read_bytes()

    def child(self, rng: random.Random) -> None:
        from memself.index.sync import VectorIndex

        while True:
            self.round += 1
            # The same steps as the command: read the store, re-encode, write a new generation.
            memories = MemoryStore(self.paths).all()
            VectorIndex.for_paths(self.paths).rebuild(
                memories, self.encoder, T0 + timedelta(seconds=self.round)
            )

    def finish(self) -> None:
        from memself.index.sync import VectorIndex

        VectorIndex.for_paths(self.paths).rebuild(
            MemoryStore(self.paths).all(), self.encoder, datetime.now(timezone.utc)
        )

    def check(self, state: dict[str, Any]) -> tuple[int, int]:
        from memself.index.sync import VectorIndex

        lost, duplicated = self.count(state, set(self.seeds))
        if self.paths.group_file("rule").read_bytes() != self.before:
            state["unreadable"] += 1
        index = VectorIndex.for_paths(self.paths)
        if index.problem or (index.generation and set(index.ids) != set(self.seeds)):
            state["unreadable"] += 1
        return lost, duplicated


SCENARIOS: dict[str, Callable[[DataPaths], Scenario]] = {
    "add": Add,
    "append-compact": AppendCompact,
    "delete": Delete,
    "restore": Restore,
    "judge-apply": JudgeApply,
    "rebuild-index": RebuildIndex,
}


def run(kind: str, kills: int, seed: int) -> dict[str, Any]:
    paths = DataPaths.default()
    paths.ensure()
    scenario = SCENARIOS[kind](paths)
    scenario.seed()
    rng = random.Random(seed)
    totals = {
        "kind": kind,
        "kills": 0,
        "exited": 0,
        "lost": 0,
        "duplicated": 0,
        "unreadable": 0,
        "torn": 0,
        "torn_left": 0,
        "reseeds": 0,
        "acked": 0,
    }
    started = time.monotonic()
    for n in range(kills):
        child_seed = rng.getrandbits(32)
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                scenario.child(random.Random(child_seed))
            except BaseException:  # a child that fails must say so, not vanish
                import traceback

                traceback.print_exc()
                code = 3
            os._exit(code)
        time.sleep(rng.uniform(*scenario.delay))
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
            totals["kills"] += 1
        else:
            totals["exited"] += 1
        state = scenario.read_state()
        if state["torn"]:
            totals["torn"] += state["torn"]
            scenario.next_writer()
            state = scenario.read_state()
            totals["torn_left"] += state["torn"]
        lost, duplicated = scenario.check(state)
        totals["lost"] += lost
        totals["duplicated"] += duplicated
        totals["unreadable"] += state["unreadable"]
        if lost or duplicated or state["unreadable"] or state["torn"]:
            totals.setdefault("first_failure", n)
            scenario.seed()  # count each failure once, then start clean
            totals["reseeds"] += 1
        elif scenario.needs_reseed(state):
            totals["acked"] += len(scenario.acked())
            scenario.seed()
            totals["reseeds"] += 1
    totals["acked"] += len(scenario.acked())
    totals["torn_kept"] = scenario.torn_kept()
    totals["seconds"] = round(time.monotonic() - started, 1)
    totals["replayed"] = _log_count(paths, " intent-replayed ")
    totals["index_writes"] = _log_count(paths, " index.written ")
    scenario.finish()
    totals["leftovers"] = _leftovers_after_maintenance(paths)
    return totals


def _log_count(paths: DataPaths, needle: str) -> int:
    try:
        return paths.log_file.read_text("utf-8", errors="replace").count(needle)
    except FileNotFoundError:
        return 0


def _leftovers_after_maintenance(paths: DataPaths) -> list[str]:
    """What a killed writer left that the next day's maintenance did not clear."""
    from memself.maintenance import run_daily_maintenance

    try:
        run_daily_maintenance(paths, 30, datetime.now(timezone.utc))
    except Exception as exc:  # reported, not hidden: the test shows the summary
        return [f"maintenance failed: {exc}"]
    left = []
    for folder in (paths.root, paths.index_dir):
        if not folder.is_dir():
            continue
        for path in folder.iterdir():
            if (
                ".tmp." in path.name
                or path.name.startswith(".memory-write-")
                or path.name.startswith(".memory-write.intent")
            ):
                left.append(path.name)
    header = paths.index_dir / "header.json"
    if header.exists():
        named = {str(v) for v in json.loads(header.read_text()).values()}
        left += [p.name for p in paths.index_dir.glob("*.npy") if p.name not in named]
    return left


def main(argv: list[str]) -> int:
    kind, kills, seed = argv[0], int(argv[1]), int(argv[2])
    print(json.dumps(run(kind, kills, seed)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
