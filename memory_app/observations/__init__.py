"""Offloaded observations (seed 004): a large tool result is kept whole as an observation and the
model is given a summary and an id to read it back with `scratchpad_read`; compaction's cheap
tier keeps masked results here too (`Feature.result_store`).

Slots: all of them but `context`: it adds nothing to the system prompt or the latest message (the
model learns of an observation from the tool result that names it, and `scratchpad_read` is
offered only while one is live), and its work is done by its `hooks` around a step's tool
calls. Its own modules beside the slots: `content.py` (what is kept and how it is summarized),
`hooks.py`, `grep.py`, `references.py` (`{{stepN.field}}` references).
"""
