"""Where the data directory is, with ``os.path`` alone: the hook's fast path finds the engine
from it without importing pathlib (``memself.paths`` builds on it)."""

import os

HOME_ENV = "MEMSELF_HOME"
# One data directory, shared by every host and the original plugin.
DEFAULT_DIR_NAME = ".memory-self-evolution"


def data_root_text() -> str:
    """``$MEMSELF_HOME`` or ``~/.memory-self-evolution``, as a string."""
    override = os.environ.get(HOME_ENV, "").strip()
    if override:
        return os.path.expanduser(override)
    return os.path.join(os.path.expanduser("~"), DEFAULT_DIR_NAME)
