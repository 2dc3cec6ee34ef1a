"""WorkBuddy: hooks in ``~/.workbuddy/settings.json``, MCP in ``~/.workbuddy/mcp.json``.

WorkBuddy embeds the CodeBuddy engine with its own config root. Its user MCP file is reported
as ``~/.workbuddy/mcp.json`` by three independent sources and as ``.mcp.json`` by one
(host-protocols U17); we write the former, as the original plugin did, and clean an entry of
ours from the latter. WorkBuddy shows a new server disabled until the user approves it in
Connectors, so setup says so.
"""

from memself.hosts import workbuddy as workbuddy_host
from memself.install.jsonhost import JsonHostInstaller

INSTALLER = JsonHostInstaller(
    name="workbuddy",
    label="WorkBuddy",
    config_dir=workbuddy_host.CONFIG_DIR,
    hooks_file="settings.json",
    hook_shape="nested",
    mcp_file="mcp.json",
    other_mcp_files=(".mcp.json",),
)
