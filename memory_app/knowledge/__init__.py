"""The agent's knowledge tools (DESIGN.md, "Agents: what outlives a session"; seed 000's
knowledge architecture): `edit_system_prompt` on the agent's learned text, `read_skill`,
`write_skill`, `delete_skill`, and `agent_state`. Offered only to a session that has an agent
(`SessionSnapshot.agent_id`).

Slots: `settings` (the `knowledge` session settings of PROTOCOL.md v1.2), `prompts`, `tools`,
`scripted`, `feature`. It has none of the others yet, and says why:
- no `models`, `services`, `selectors` or `admin`: agents are core data (`sessions_app.agent_models`,
  written by `sessions_app.services.agent_knowledge`, read by
  `sessions_app.agent_knowledge_selectors`), since the agent websocket, the dashboard and the
  admin read them too; the admin's pages are the agents' own;
- no `context`: the agent's instructions, `## Learned Instructions` and `## Skills` are rendered
  by the engine itself (pinned per epoch with the session's agent), before every feature's
  section, so this feature adds no section of its own;
- no `dashboard`: the operator's view of agents is a page of its own (the dashboard's Agents
  section), not a panel of a session.
"""
