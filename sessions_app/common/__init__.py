"""The neutral floor: what both the engine and the data layer (services, selectors) need, and what
features may use beside the engine's contract. It imports nothing else of the project but
`fastpath.compat` (the frameworks' internals it relies on, below every floor).

- `types`: the records of a turn's work (`StoredMessage`, `ToolOutcome`, `PlannedToolCall`,
  `ModelCallData`);
- `estimate`: local token estimates (tiktoken's offline file);
- `canonical`: the canonical JSON that requests are hashed and compared in;
- `content`: the text of message content and the omission marker;
- `caches`: bounded maps (LRU by count or by size, expiring);
- `db`: the ORM from async code (`db`, `db_heavy`).
"""
