"""memself: self-evolving long-term memory for AI coding assistants.

This package must stay importable with the standard library only: the hook path imports it
under ``python -I -S``. Heavy dependencies (numpy, torch, sentence-transformers, httpx, mcp)
are imported lazily by the modules that need them.
"""

__version__ = "0.1.0"
