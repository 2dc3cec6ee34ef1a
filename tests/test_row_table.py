"""The embedding table read by row: it lets go of its file when closed or dropped, so a folder
holding it can be moved on Windows (which renames no folder with an open file in it)."""

from __future__ import annotations

import gc
from pathlib import Path

import numpy as np
import pytest

from memself.model.row_table import RowTable
from tests.support.helpers import open_paths

pytestmark = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads /proc/self/fd")


def _table(tmp_path: Path) -> tuple[Path, RowTable]:
    path = tmp_path / "embeddings.npy"
    np.save(path, np.arange(12, dtype=np.float32).reshape(4, 3))
    return path, RowTable(path)


def test_close_lets_go_of_the_file_and_later_reads_fail(tmp_path: Path) -> None:
    path, table = _table(tmp_path)
    assert table.take(np.array([2])).tolist() == [[6.0, 7.0, 8.0]]
    assert str(path) in open_paths()
    table.close()
    table.close()  # twice is fine
    assert str(path) not in open_paths()
    with pytest.raises(OSError):
        table.take(np.array([3]))


def test_a_dropped_table_lets_go_of_its_file(tmp_path: Path) -> None:
    path, table = _table(tmp_path)
    del table
    gc.collect()
    assert str(path) not in open_paths()
