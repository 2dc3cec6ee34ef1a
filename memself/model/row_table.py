"""The word-embedding table, read row by row from its ``.npy`` file.

The table holds a row for every token of the vocabulary, hundreds of MB for a multilingual one,
and a text touches a few dozen rows. A memory map would keep every page a text ever touched
mapped into the process, so the engine's resident size would climb with each new word for as
long as it lives, towards the whole file. Rows are read with ``pread`` instead: the file's pages
stay in the kernel's page cache (shared, reclaimable), and the process holds only the rows of the
text at hand. Where ``pread`` is missing (Windows), a memory map is read and its pages handed back
after each lookup.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np


class RowTable:
    """A read-only 2-D ``.npy`` array in C order, looked up by row."""

    def __init__(self, path: Path) -> None:
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
        self._fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
        size = os.fstat(self._fd).st_size
        if size < self._offset + self.shape[0] * self._row_bytes:
            os.close(self._fd)
            raise ValueError(f"{path.name}: shorter than its header says")
        self._map: mmap.mmap | None = None
        if not hasattr(os, "pread"):  # pragma: no cover - Windows
            self._map = mmap.mmap(self._fd, 0, access=mmap.ACCESS_READ)

    def take(self, ids: np.ndarray) -> np.ndarray:
        """The rows of ``ids`` (row numbers, any shape), copied: shape ``ids.shape + (dim,)``."""
        import numpy as np

        ids = np.asarray(ids)
        wanted, inverse = np.unique(ids.reshape(-1), return_inverse=True)
        if wanted.size and (wanted[0] < 0 or wanted[-1] >= self.shape[0]):
            raise IndexError("row out of range")
        rows = np.empty((wanted.size, self.shape[1]), dtype=self.dtype)
        if self._map is None:
            for j, row in enumerate(wanted.tolist()):
                data = os.pread(self._fd, self._row_bytes, self._offset + row * self._row_bytes)
                rows[j] = np.frombuffer(data, dtype=self.dtype)
        else:  # pragma: no cover - Windows
            table = np.frombuffer(
                self._map, dtype=self.dtype, count=self.shape[0] * self.shape[1], offset=self._offset
            )
            rows[:] = table.reshape(self.shape)[wanted]
            del table
            advise = getattr(self._map, "madvise", None)
            if advise is not None and hasattr(mmap, "MADV_DONTNEED"):
                advise(mmap.MADV_DONTNEED)
        return rows[inverse].reshape((*ids.shape, self.shape[1]))
