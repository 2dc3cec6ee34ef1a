"""Cursor: hooks in ``~/.cursor/hooks.json`` (flat entries), MCP in ``~/.cursor/mcp.json``.

The skill also goes to ``~/.cursor/skills``, although Cursor reads ``~/.claude/skills`` too: the
copies are byte-identical and share one name, and a passive skill listed twice costs nothing,
whereas relying on the Claude copy would make ``uninstall --only claude`` take it from Cursor.
"""

from memself.hosts import cursor as cursor_host
from memself.hosts.base import EventKind
from memself.install.jsonhost import JsonHostInstaller

INSTALLER = JsonHostInstaller(
    name="cursor",
    label="Cursor",
    config_dir=cursor_host.CONFIG_DIR,
    hooks_file="hooks.json",
    hook_shape="flat",
    mcp_file="mcp.json",
    # One continuation per turn at most, enforced by Cursor itself: memself's stop hook asks
    # once (loop_count > 0 already reads as stop-active), and Cursor's default cap is 5.
    hook_fields={EventKind.STOP: {"loop_limit": 1}},
)
