"""The word-embedding table, read row by row from its ``.npy`` file, with the rows in use kept.

The table holds a row for every token of the vocabulary, hundreds of MB for a multilingual one,
and a text touches a few dozen rows. A memory map would keep every page a text ever touched
mapped into the process, so the engine's resident size would climb with each new word for as
long as it lives, towards the whole file. Rows are read with ``pread`` instead (the file's pages
stay in the kernel's page cache, shared and reclaimable) into a fixed number of slots, reused
first in first out: frequent tokens are read once, and the process never holds more than
``CACHED_ROWS`` rows however many words it meets.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memself.platform import files

if TYPE_CHECKING:
    import numpy as np

CACHED_ROWS = 4096


class RowTable:
    """A read-only 2-D ``.npy`` array in C order, looked up by row."""

    def __init__(self, path: Path, cached_rows: int = CACHED_ROWS) -> None:
        import numpy as np

        with open(path, "rb") as handle:
            version = np.lib.format.read_magic(handle)
            if version == (1, 0):
                shape, fortran_order, dtype = np.lib.format.read_array_header_1_0(handle)
            else:
                shape, fortran_order, dtype = np.lib.format.read_array_header_2_0(handle)
            if fortran_order or len(shape) != 2 or dtype.hasobject:
                raise ValueError(f"{path.name}: not a C-order 2-D numeric array")
            self._offset = handle.tell()
        self.shape: tuple[int, int] = (int(shape[0]), int(shape[1]))
        self.dtype: Any = dtype
        self._row_bytes = self.shape[1] * dtype.itemsize
        self._lock = threading.Lock()  # the engine's backlog thread encodes too
        fd = os.open(path, os.O_RDONLY | files.BINARY)
        if os.fstat(fd).st_size < self._offset + self.shape[0] * self._row_bytes:
            os.close(fd)
            raise ValueError(f"{path.name}: shorter than its header says")
        self._fd = fd
        slots = max(1, min(cached_rows, self.shape[0]))
        self._slots: Any = np.empty((slots, self.shape[1]), dtype=dtype)
        self._slot_of: dict[int, int] = {}  # row -> slot
        self._owner = [-1] * slots  # slot -> row
        self._next = 0

    def close(self) -> None:
        """Let go of the file: Windows renames no folder, and deletes no file, that a process holds
        open (a preparation checks its model in a folder it then moves into place)."""
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def __del__(self) -> None:
        if getattr(self, "_fd", -1) >= 0:
            self.close()

    @property
    def cached(self) -> int:
        return len(self._slot_of)

    def take(self, ids: np.ndarray) -> np.ndarray:
        """The rows of ``ids`` (row numbers, any shape), copied: shape ``ids.shape + (dim,)``."""
        import numpy as np

        ids = np.asarray(ids)
        wanted, inverse = np.unique(ids.reshape(-1), return_inverse=True)
        if wanted.size and (wanted[0] < 0 or wanted[-1] >= self.shape[0]):
            raise IndexError("row out of range")
        rows = np.empty((wanted.size, self.shape[1]), dtype=self.dtype)
        wanted_rows = wanted.tolist()
        with self._lock:
            hits, hit_slots, misses = [], [], []
            for j, row in enumerate(wanted_rows):
                slot = self._slot_of.get(row)
                if slot is None:
                    misses.append(j)
                else:
                    hits.append(j)
                    hit_slots.append(slot)
            if hits:  # gathered before a miss may reuse their slots
                rows[hits] = self._slots[hit_slots]
            for j in misses:
                rows[j] = self._load(wanted_rows[j])
        return rows[inverse].reshape((*ids.shape, self.shape[1]))

    def _load(self, row: int) -> Any:
        """Read ``row`` from the file into the next slot; the slot's array."""
        import numpy as np

        slot = self._next
        self._next = (slot + 1) % len(self._owner)
        old = self._owner[slot]
        if old >= 0:
            del self._slot_of[old]
        self._owner[slot] = -1
        position = self._offset + row * self._row_bytes
        # Where there is no pread (Windows) this is a seek and a read: one step under the lock.
        data = files.read_at(self._fd, self._row_bytes, position)
        if len(data) != self._row_bytes:
            raise OSError(f"short read of row {row}")
        self._slots[slot] = np.frombuffer(data, dtype=self.dtype)
        self._owner[slot] = row
        self._slot_of[row] = slot
        return self._slots[slot]
