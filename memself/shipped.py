"""Where the repository's top-level folders are: ``hooks/`` (what hosts execute), ``hosts/`` (each
host's facts) and ``installers/`` (install scripts and per-host templates).

In a source tree (a clone, an editable install) they sit beside the package; a wheel carries them
inside it, under ``memself/_shipped/`` (``setup.py`` copies them there), so an installed
memself never depends on the clone it was built from.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def shipped_dir(name: str) -> Path:
    """The folder ``name`` as this memself runs it: the wheel's copy, else the source tree's."""
    inside = _PACKAGE / "_shipped" / name
    return inside if inside.is_dir() else _PACKAGE.parent / name
