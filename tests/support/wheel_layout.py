"""A copy of memself laid out as an installed wheel has it: the package, with the repository's
top-level folders (hooks/, hosts/, installers/) inside it under ``_shipped`` (setup.py copies them)."""

from __future__ import annotations

import shutil
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ("hooks", "hosts", "installers")


def install_copy(site: Path) -> Path:
    """Copy the package into ``site`` as a wheel would install it; the package folder."""
    ignore = shutil.ignore_patterns("__pycache__")
    package = site / "memself"
    shutil.copytree(REPO_ROOT / "memself", package, ignore=ignore)
    for folder in SHIPPED:
        shutil.copytree(REPO_ROOT / folder, package / "_shipped" / folder, ignore=ignore)
    return package
