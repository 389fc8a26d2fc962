"""The agent websocket (docs/PROTOCOL.md): what an agent client connects to, and what it shares
with the dashboard's websockets.

- `consumer`: `AgentConsumer`, a thin adapter from frames to services and the engine;
- `frames`: validation of client frames;
- `event_stream`: a session's events in `seq` order over a websocket (replay, then broadcasts,
  gaps filled from the database), shared with the dashboard's session page;
- `flow`: flow control of sends (a client that does not read is paused, then closed with 4408);
- `connections`: this process's open connections by token, and the re-check of their tokens;
- `quotas`: per-token quotas (sessions a minute, frames a second, open connections);
- `security`: the Origin check of websockets that non-browser clients use too.

The URL table of the app's websockets is `sessions_app/routing.py` (Channels' layout: one
`routing.py` per app), which names this consumer and the dashboard's.
"""
