"""The command line. Each module registers its commands on ``main``; commands stay thin."""

# Imported for their effect: each command module registers its commands on ``main``.
from memself.cli import (  # noqa: F401
    engine_cmds,
    hook_cmds,
    judge_cmds,
    key_cmds,
    mcp_cmds,
    memory_cmds,
    model_cmds,
    recall_cmds,
    setup_cmds,
    share_cmds,
    stats_cmds,
    sync_cmds,
    views_cmds,
)
from memself.cli.app import main

__all__ = ["main"]
