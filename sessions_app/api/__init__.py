"""The HTTP API v1 (PROTOCOL.md, "HTTP API v1"; docs/api.md): JSON under `/api/v1/` on
django-ninja, an interface beside the agent websocket and the dashboard. Its views parse the
request (pydantic schemas, `extra="forbid"`), check the bearer token and the client's ownership
as the websocket does, call one engine function, service or selector, and reply; every rule lives
below it.

`app.api` is the `NinjaAPI` that `config/urls.py` mounts; its routers are `sessions`, `agents`
and `knowledge` (skills, their zip, state)."""
