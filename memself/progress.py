"""Progress bars for long work (preparing a model, rebuilding the index): click's bar on a
terminal, nothing at all when stdout is not one (a pipe, a log, a test)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator

Advance = Callable[[int, str], None]


def _noop(_n: int, _what: str = "") -> None:
    return None


@contextlib.contextmanager
def progress_bar(label: str, total: int) -> Iterator[Advance]:
    """Yields ``advance(n, what)``: ``n`` more units done, ``what`` the step now running."""
    if total <= 0 or not sys.stdout.isatty():
        yield _noop
        return
    import click

    with click.progressbar(
        length=total, label=label, file=sys.stdout, item_show_func=lambda item: item or ""
    ) as bar:

        def advance(n: int, what: str = "") -> None:
            bar.update(n, what or None)

        yield advance
