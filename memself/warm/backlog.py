"""The engine's encoding backlog: memories without a vector, encoded by a thread of their own.

An engine that meets many memories without vectors (the first start on a model, a model change,
a large store brought over from the original) serves the memories already encoded at once and
hands the rest to a ``Backlog``. Its thread encodes them in small chunks, never while a request
is being served (``serving``), and writes what it has encoded as one index generation every few
seconds (``VectorIndex.add_encoded``: a crash loses at most the rows since the last write, never
the index). After each write it calls ``publish`` with the index it wrote, so the service can make
those memories searchable.

The service gives the backlog a new plan whenever the memories change (``assign``): the queue
becomes that plan's rows, so a deleted memory is never written and a new one is encoded.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from memself.logs import log
from memself.paths import DataPaths

if TYPE_CHECKING:
    from memself.index.sync import SyncPlan, VectorIndex, Vectors
    from memself.model.encoder import Encoder

# Texts per encoder call: small, so a prompt that arrives meanwhile waits little for the cores.
CHUNK = 8
# The shortest time between two index writes; a write also waits ten times as long as the last
# one took, so rewriting a large index never takes more than a small share of the time.
MIN_WRITE_INTERVAL_S = 2.0
_WRITE_COST_FACTOR = 10.0

Item = tuple[str, str, bytes]  # row id, text, text hash
_WRITTEN, _STALE, _FAILED = "written", "stale", "failed"


class Backlog:
    """Encodes the rows a plan left to encode, in the background, writing and publishing as it goes.

    ``publish(writer)`` is called on the backlog's thread after each write, with the index that
    wrote it; ``clock`` is a monotonic clock in seconds.
    """

    def __init__(
        self,
        paths: DataPaths,
        publish: Callable[[VectorIndex], None],
        clock: Callable[[], float] = time.monotonic,
        chunk: int = CHUNK,
        min_interval_s: float = MIN_WRITE_INTERVAL_S,
    ) -> None:
        self._paths = paths
        self._publish = publish
        self._clock = clock
        self._chunk = max(1, chunk)
        self._min_interval_s = min_interval_s
        self._cond = threading.Condition()
        # Serialises this process's index writes: a plan's writes and the backlog's never cross,
        # so a write with a replaced model's encoder can never follow the new model's.
        self.write_lock = threading.Lock()
        self._queue: deque[Item] = deque()
        self._known: set[str] = set()
        self._inflight: dict[str, bytes] = {}  # the chunk in the encoder: row id -> text hash
        self._wanted: dict[str, tuple[str, bytes]] = {}
        self._encoder: Encoder | None = None
        self._serving = 0
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._busy = False  # a chunk is being encoded or pending rows written
        self.done = 0
        self.total = 0
        self.failed = 0
        self._started = 0.0
        self.last_written = ""  # the generation of the backlog's last write

    # ----- the service's side

    def assign(self, plan: SyncPlan, encoder: Encoder, leave_out: set[str]) -> None:
        """Encode ``plan``'s todo rows except ``leave_out`` (the service encodes those itself);
        ``plan.wanted`` is what every later write keeps. Call it with ``write_lock`` held."""
        with self._cond:
            # A chunk in the encoder now lands in the next write, with this plan's wanted rows
            # (unless it is another model's: that chunk is dropped).
            inflight = self._inflight if encoder is self._encoder else {}
            items = [
                item for item in plan.todo if item[0] not in leave_out and inflight.get(item[0]) != item[2]
            ]
            if not self._queue and not self._busy:
                self.done, self.failed, self._started = 0, 0, self._clock()
            if encoder is not self._encoder:
                self.done = 0
                self._started = self._clock()
            self._queue = deque(items)
            self._known = {item[0] for item in items}
            self._wanted = plan.wanted
            self._encoder = encoder
            self.total = self.done + len(items)
            if items and self._thread is None:
                self._thread = threading.Thread(target=self._run, name="engine-encode", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def known(self) -> set[str]:
        """Row ids the backlog is encoding now (queued, or encoded and not written yet)."""
        with self._cond:
            return set(self._known)

    def active(self) -> bool:
        with self._cond:
            return bool(self._queue) or self._busy

    @contextlib.contextmanager
    def serving(self) -> Iterator[None]:
        """Around a request: no new chunk starts until it is answered."""
        with self._cond:
            self._serving += 1
        try:
            yield
        finally:
            with self._cond:
                self._serving -= 1
                self._cond.notify_all()

    def progress(self) -> dict[str, Any] | None:
        """done, total, rate (rows per second) and seconds left; None when nothing is waiting."""
        with self._cond:
            if not self._queue and not self._busy:
                return None
            done, total, elapsed = self.done, self.total, self._clock() - self._started
        rate = done / elapsed if elapsed > 0 and done else 0.0
        left = (total - done) / rate if rate else None
        return {
            "done": done,
            "total": total,
            "rate_per_s": round(rate, 1),
            "eta_s": None if left is None else round(left, 1),
        }

    def close(self, wait_s: float = 2.0) -> None:
        """Stop after the chunk in hand (its rows are lost; the next engine encodes them again)."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(wait_s)

    # ----- the backlog's thread

    def _run(self) -> None:
        from memself.index.sync import VectorIndex

        writer = VectorIndex(self._paths.index_dir, self._paths.legacy_embeddings, self._paths)
        pending: Vectors = {}
        pending_encoder: Encoder | None = None
        last_write = self._clock()
        interval = self._min_interval_s
        while True:
            with self._cond:
                while (
                    not self._stopping
                    and (self._serving or not self._queue)
                    and not (pending and not self._queue)
                ):
                    self._busy = bool(pending)
                    self._cond.wait(0.5)
                if self._stopping:
                    self._busy = False
                    return
                self._busy = True
                encoder = self._encoder
                if encoder is not pending_encoder:
                    pending, pending_encoder = {}, encoder
                chunk: list[Item] = []
                while self._queue and len(chunk) < self._chunk:
                    item = self._queue.popleft()
                    held = pending.get(item[0])
                    if held is not None and held[1] == item[2]:
                        self.done += 1  # encoded already, queued again by a newer plan
                        continue
                    chunk.append(item)
                more = bool(self._queue)
                self._inflight = {item[0]: item[2] for item in chunk}
            if chunk and encoder is not None:
                from memself.index.sync import SyncResult

                result = SyncResult()
                pending.update(writer.encode(chunk, encoder, result))
                with self._cond:
                    self._inflight = {}
                    self.done += len(chunk)
                    self.failed += len(result.failed)
            if pending and (not more or self._clock() - last_write >= interval):
                began = self._clock()
                outcome = self._write(writer, pending, pending_encoder)
                last_write = self._clock()
                if outcome == _FAILED:
                    # Kept for the next try (a full disk may clear); until then nothing is lost
                    # but time, and the loop must not spin on a disk that stays full.
                    with self._cond:
                        self._cond.wait(self._min_interval_s)
                    continue
                if outcome == _WRITTEN:
                    try:
                        self._publish(writer)
                    except Exception as exc:  # the rows are on disk; the next reload serves them
                        log(self._paths, "index-backlog-publish-failed", error=type(exc).__name__)
                pending = {}
                interval = max(self._min_interval_s, _WRITE_COST_FACTOR * (last_write - began))
                with self._cond:
                    self._known = {item[0] for item in self._queue}
                    self._busy = bool(self._queue)

    def _write(self, writer: VectorIndex, pending: Vectors, encoder: Encoder | None) -> str:
        """Write ``pending`` into the index with the rows the service wants now: ``_WRITTEN``;
        ``_STALE`` when they belong to a replaced model (dropped); ``_FAILED`` when the write
        failed (kept for another try)."""
        with self.write_lock:
            with self._cond:
                wanted, current = self._wanted, self._encoder
            if encoder is None or encoder is not current:
                return _STALE
            try:
                result = writer.add_encoded(wanted, pending, encoder)
            except Exception as exc:  # a full disk or a stuck lock must not end the engine
                log(self._paths, "index-backlog-write-failed", error=type(exc).__name__)
                return _FAILED
            if result.written:
                self.last_written = writer.generation
            return _WRITTEN
