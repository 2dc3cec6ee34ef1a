"""CodeBuddy: hooks in ``~/.codebuddy/settings.json``, MCP in ``~/.codebuddy/.mcp.json``.

The MCP file was measured, not guessed: the CodeBuddy Code CLI 2.117.0
(``@tencent-ai/agent-sdk@0.3.201``) ``mcp add --scope user`` writes ``~/.codebuddy/.mcp.json``,
and its ``mcp list`` reads that file but neither ``~/.codebuddy/mcp.json`` nor
``~/.codebuddy.json``. The original plugin wrote ``~/.codebuddy/mcp.json``; an entry of ours
there is kept current and removed on uninstall.
"""

from memself.installers.jsonhost import JsonHostInstaller

INSTALLER = JsonHostInstaller(
    name="codebuddy",
    label="CodeBuddy",
    config_dir=".codebuddy",
    hooks_file="settings.json",
    hook_shape="nested",
    mcp_file=".mcp.json",
    other_mcp_files=("mcp.json",),
)
