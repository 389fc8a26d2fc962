"""Agent-authored tools (DESIGN.md, "Agent-authored tools"; seed 000: the sandbox API is
"available in agent-authored tools"): `define_tool` and `remove_tool`, and every tool an agent
defined, offered to each session of the agent from its next model call and run in the code
sandbox.

Slots: `prompts`, `settings` (when it is on: no setting of its own), `tools` (define_tool,
remove_tool), `source` (the agent's tools as `ToolSpec`s: the feature's `tool_source`), `runner`
(one call of an authored tool in the sandbox), `scripted`, `feature`. It has none of the others,
and says why:
- no `models`, `services`, `selectors` or `admin`: an agent's tools are core data
  (`sessions_app.agent_models.AgentTool`, written by
  `sessions_app.services.agent_knowledge.tools`, read by `sessions_app.agent_knowledge_selectors`),
  since the agent websocket, the dashboard and the HTTP API read them too;
- no settings of its own: it is switched by the knowledge feature's `knowledge.tool_authoring`
  and the sandbox's `sandbox.enabled`, and runs with the sandbox's `timeout_seconds` and
  `memory_mb`;
- no `context`: the tools are in the request's tools block, which needs no guidance;
- no `dashboard`: an agent's tools belong on the agent's page (the dashboard's Agents section).
"""
