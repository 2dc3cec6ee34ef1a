"""The console's encoding: a Chinese Windows console (or a pipe read as one) is GBK, which has
no emoji and no rarer characters. Text that cannot be spelled there becomes "?" instead of a
crash (the memory itself is stored untouched). What a host parses (hook replies, MCP) is written
as UTF-8 bytes and never goes through here.
"""

from __future__ import annotations

import codecs
import sys


def tolerate_narrow_encodings() -> None:
    """Let ``sys.stdout`` and ``sys.stderr`` replace what their encoding cannot spell."""
    for stream in (sys.stdout, sys.stderr):
        encoding = getattr(stream, "encoding", None) or "utf-8"
        reconfigure = getattr(stream, "reconfigure", None)
        try:
            wide = codecs.lookup(encoding).name in ("utf-8", "utf-16", "utf-32")
        except LookupError:
            wide = False
        if not wide and callable(reconfigure):
            reconfigure(errors="replace")
