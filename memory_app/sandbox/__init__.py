"""The code sandbox of `run_sandbox_code` (seed 000, DESIGN.md): Python run in a bubblewrap jail, with
`session.notepad` bridged to the server. docs/sandbox.md is the threat model.

Public API: `sandbox_available()`, `sandbox_run(...)` -> `SandboxResult`, `SandboxError`,
`SandboxUnavailable` (jail.py, errors.py) and `SandboxNotepad` (bridge.py). Nothing here is wired into
the engine: the sandbox feature's tool calls these.
"""
