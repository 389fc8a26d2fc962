"""`recall` (DESIGN.md "Agents"): full-text search over what an agent's sessions said and were
told, or over a session's own archives where it has no agent.

No models, services, selectors, context, admin or dashboard here: the index is core data
(`sessions_app.recall_models`, written by `sessions_app.services.recall` with the rows it
indexes, read by `sessions_app.recall_selectors`), and the tool adds no section to the prompt.
"""
