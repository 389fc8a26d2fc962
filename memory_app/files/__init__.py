"""`fs_read`, seed 004's executor: a server tool reading a file of the server's shared folder
(PALIMPSEST_FS_ROOT), jailed to it; off without it.

Slots: `prompts` (its description and schema), `tools`, `feature`. It has none of the others:
no `models`, `services`, `selectors` or `admin`, as it reads files, never the database (a large
result is kept by the observations feature's hook, like any tool's); no `context`, as it adds
nothing to the prompt but its tool definition; no `scripted` rule of its own, as the scripted
model's `read FILE` belongs to the observations feature, whose offloading it demonstrates.
"""
