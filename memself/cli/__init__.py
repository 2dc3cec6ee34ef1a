"""The command line. Each module registers its commands on ``main``; commands stay thin."""

import importlib

from memself.cli.app import main

# Command families owned by different parts of the code; a family that is not there yet is skipped.
for _module in (
    "memory_cmds",
    "recall_cmds",
    "engine_cmds",
    "model_cmds",
    "side_cmds",
    "setup_cmds",
    "hook_cmds",
    "key_cmds",
):
    try:
        importlib.import_module(f"memself.cli.{_module}")
    except ModuleNotFoundError as _exc:
        if _exc.name != f"memself.cli.{_module}":
            raise

__all__ = ["main"]
