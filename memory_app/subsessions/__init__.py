"""Sub-sessions (seed 000: `spawn_session`, `fork_session`, `report_result`): a child session
runs a task for its parent's call, which waits for its result.

Slots: all of them but `models` and `admin`: a child is an ordinary session, and its place in its
tree is on the session row (`parent_session`, `root_session`, `depth`, `sessions_app`'s models
and admin), so the feature stores nothing of its own. `runs.py` runs a child's turn through
`ToolContext.turns`.
"""
