"""MCP tool servers (docs/mcp.md): the tools of the servers operators configured, offered to a
session as `mcp__<server>__<tool>` and run by a process-wide manager through the `mcp` SDK.

No models of its own: an agent's servers are core data (`sessions_app.agent_models.AgentMcpServer`),
the service's are a setting (`PALIMPSEST_MCP_SERVERS`). No context section and no session
setting: an operator's configuration decides, not a session's."""
