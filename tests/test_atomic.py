"""``save_npy``: the one atomic array writer (the vector index and the recall-space cache)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import pytest

from memself.atomic import save_npy


def test_save_npy_replaces_the_file_private_and_leaves_no_temp(tmp_path: Path) -> None:
    folder = tmp_path / "d"
    folder.mkdir()
    path = folder / "a.npy"
    save_npy(path, np.arange(4, dtype=np.float32))
    save_npy(path, np.ones((2, 3), dtype=np.float32))
    assert np.array_equal(np.load(path), np.ones((2, 3), dtype=np.float32))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert [p.name for p in folder.iterdir()] == ["a.npy"]


def test_failed_save_keeps_the_old_file_and_removes_the_temp(tmp_path: Path) -> None:
    folder = tmp_path / "d"
    folder.mkdir()
    path = folder / "a.npy"
    save_npy(path, np.arange(3, dtype=np.float32))
    with pytest.raises(ValueError):  # object arrays need pickle, which is refused
        save_npy(path, np.array([{"x": 1}], dtype=object))
    assert np.array_equal(np.load(path), np.arange(3, dtype=np.float32))
    assert [p.name for p in folder.iterdir()] == ["a.npy"]


def test_save_npy_through_a_link_keeps_the_link(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link.npy").symlink_to(real / "target.npy")
    save_npy(tmp_path / "link.npy", np.zeros(2, dtype=np.float32))
    assert (tmp_path / "link.npy").is_symlink()
    assert np.array_equal(np.load(real / "target.npy"), np.zeros(2, dtype=np.float32))
