"""CodeBuddy: hooks in ``settings.json``, MCP in ``.mcp.json`` or ``mcp.json``, in its config folder.

Measured, not guessed, on the CodeBuddy Code CLI 2.117.0 (``@tencent-ai/agent-sdk@0.3.201``):
- its config folder is ``$CODEBUDDY_CONFIG_DIR`` when set, else ``~/.codebuddy``;
- its user MCP servers come from the first of ``.mcp.json`` and ``mcp.json`` in that folder that
  exists (``mcp add --scope user`` creates ``.mcp.json``). The original plugin wrote ``mcp.json``:
  a user who has only that file keeps it, with ours added, because creating ``.mcp.json`` beside
  it would hide every server in it from CodeBuddy.
WorkBuddy runs the same engine with ``CODEBUDDY_CONFIG_DIR`` at ``~/.workbuddy``; that folder is
WorkBuddy's (its own installer), never CodeBuddy's.
"""

from memself.hosts import codebuddy as codebuddy_host
from memself.hosts import workbuddy as workbuddy_host
from memself.install.jsonhost import JsonHostInstaller

INSTALLER = JsonHostInstaller(
    name="codebuddy",
    label="CodeBuddy",
    config_dir=codebuddy_host.CONFIG_DIR,
    hooks_file="settings.json",
    hook_shape="nested",
    mcp_file=".mcp.json",
    other_mcp_files=("mcp.json",),
    mcp_read_order=(".mcp.json", "mcp.json"),
    config_env=codebuddy_host.CONFIG_ENV,
    config_env_ignored=(workbuddy_host.CONFIG_DIR,),
)
