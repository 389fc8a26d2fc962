"""The code sandbox of `run_sandbox_code` (seed 000, DESIGN.md): Python run in a bubblewrap jail, with
`session.notepad` bridged to the server. docs/sandbox.md is the threat model.

Public API: `sandbox_available()`, `sandbox_run(...)` -> `SandboxResult`, `SandboxError`,
`SandboxUnavailable` (jail.py, errors.py) and `SandboxNotepad` (bridge.py). Nothing here is wired into
the engine: the sandbox feature's tool calls these.

Slots: `prompts`, `tools`, `scripted`, `feature`, and the jail's own modules. It has none of the
others: no `models`, `services`, `selectors` or `admin`, as a run stores nothing of its own (its
result is the tool's, and the notepad it changes is written through the notepad's sandbox API);
no `context`, as it adds nothing to the prompt but its tool; no `dashboard`, as a run shows in
the transcript like any tool call.
"""
