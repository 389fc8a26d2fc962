"""The least a one-step turn can do on Palimpsest's stack: an ASGI application for daphne
(`bench_floor.py` serves it as `bench._stack_floor:application`) with one Channels consumer that
does only what a turn must, written for speed and nothing else:

- takes the `user.message` frame, and in one write on a database thread (`engine.db.db`, as
  the service's own) stores the message and its `turn.started` event (`BEGIN IMMEDIATE`, an
  `UPDATE ... RETURNING` of the session's counter, two inserts, `COMMIT`, through Django's
  cursor on the same SQLite settings);
- announces the event through the channel layer to the session's group (one `group_send` per
  write), whose member sends it as a frame;
- sends the request (the history's encoded messages kept in memory, the new ones appended) with
  one streamed call through the `anthropic` SDK, read as raw events;
- stores the answer and its four events (`assistant.delta`, `assistant.message`, `usage`,
  `turn.completed`) in a second write, and announces them the same way.

No lease, no features, no request record, no token estimate, no compaction, no validation, no
authentication: what is left is the stack itself (daphne, Channels, Django's database layer,
asyncio, the SDK). The same client drives it as the service (`bench_server.Client`).
"""

from __future__ import annotations

import json
import os
import uuid
from datetime import UTC, datetime
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
import django  # noqa: E402

django.setup()

import anthropic  # noqa: E402
from channels.generic.websocket import AsyncWebsocketConsumer  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.core.asgi import get_asgi_application  # noqa: E402
from django.db import connection  # noqa: E402
from django.urls import re_path  # noqa: E402

from sessions_app.common.db import db  # noqa: E402

MODEL = "claude-sonnet-4-5"
ROLES = ("user", "assistant")
FILLER = "lorem ipsum dolor sit amet " * 8  # as `bench/_setup.py`'s history


def _tables() -> None:
    key = "INTEGER PRIMARY KEY" if connection.vendor == "sqlite" else "BIGSERIAL PRIMARY KEY"
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE IF NOT EXISTS stack_floor_session "
            "(id TEXT PRIMARY KEY, last_seq INTEGER, messages INTEGER)"
        )
        cursor.execute(
            f"CREATE TABLE IF NOT EXISTS stack_floor_message "
            f"(id {key}, session TEXT, position INTEGER, role TEXT, content TEXT)"
        )
        cursor.execute(
            f"CREATE TABLE IF NOT EXISTS stack_floor_event "
            f"(id {key}, session TEXT, seq INTEGER, type TEXT, payload TEXT, ts TEXT)"
        )
    connection.close()


_tables()
# As `config.asgi` does for the service: the SDK loaded, the start-up objects frozen.
from config.server_process import server_process_ready  # noqa: E402

server_process_ready()


def _write(session: str, role: str, content: list[dict], events: list[tuple[str, dict]]) -> list[str]:
    """One write transaction: a message, its events; returns the events' frames."""
    now = datetime.now(UTC).isoformat()
    with connection.cursor() as cursor:
        # SQLite's writer lock at once (as the service's transactions take it); PostgreSQL's
        # row lock comes with the update.
        cursor.execute("BEGIN IMMEDIATE" if connection.vendor == "sqlite" else "BEGIN")
        try:
            cursor.execute(
                "UPDATE stack_floor_session SET last_seq = last_seq + %s, messages = messages + 1 "
                "WHERE id = %s RETURNING last_seq, messages",
                [len(events), session],
            )
            last_seq, position = cursor.fetchone()
            cursor.execute(
                "INSERT INTO stack_floor_message (session, position, role, content) VALUES (%s, %s, %s, %s)",
                [session, position, role, json.dumps(content)],
            )
            first = last_seq - len(events) + 1
            frames = []
            rows: list[Any] = []
            for seq, (kind, payload) in enumerate(events, start=first):
                data = json.dumps(payload)
                rows += [session, seq, kind, data, now]
                frames.append(
                    json.dumps({"type": kind, "session_id": session, "seq": seq, "ts": now, **payload})
                )
            cursor.execute(
                "INSERT INTO stack_floor_event (session, seq, type, payload, ts) VALUES "
                + ", ".join(["(%s, %s, %s, %s, %s)"] * len(events)),
                rows,
            )
            cursor.execute("COMMIT")
        except BaseException:
            cursor.execute("ROLLBACK")
            raise
    return frames


def _session_create(session: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO stack_floor_session VALUES (%s, 0, 0)", [session])


def _client() -> Any:
    """The SDK's client as the service takes it (`anthropic_client`: a few per process, the one
    with the fewest calls in flight, so that hundreds of calls at once do not walk one pool's
    bookkeeping), for one call (`with _client() as client:`)."""
    from sessions_app.engine.providers.anthropic import anthropic_client

    return anthropic_client(api_key="bench-key", base_url=os.environ["ANTHROPIC_BASE_URL"])


class FloorConsumer(AsyncWebsocketConsumer):
    async def connect(self) -> None:
        self.session = ""
        self.history: list[bytes] = []
        await self.accept()

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        frame = json.loads(text_data or "{}")
        if frame["type"] == "session.create":
            self.session = str(uuid.uuid4())
            await db(_session_create)(self.session)
            await self.channel_layer.group_add(self.session, self.channel_name)
            await self.send(json.dumps({"type": "session.created", "session": {"id": self.session}}))
        elif frame["type"] == "floor.fill":  # the history, in memory only
            self.history = [
                json.dumps(
                    {
                        "role": ROLES[n % 2],
                        "content": [{"type": "text", "text": f"message {n}: " + FILLER}],
                    }
                ).encode()
                for n in range(frame["messages"])
            ]
            await self.send(json.dumps({"type": "floor.filled"}))
        elif frame["type"] == "user.message":
            await self.turn(frame["content"])

    async def turn(self, text: str) -> None:
        turn_id = str(uuid.uuid4())
        content = [{"type": "text", "text": text}]
        frames = await db(_write)(self.session, "user", content, [("turn.started", {"turn_id": turn_id})])
        await self.channel_layer.group_send(self.session, {"type": "events", "frames": frames})
        self.history.append(json.dumps({"role": "user", "content": content}).encode())
        body = b"".join(
            [
                b'{"model": "' + MODEL.encode() + b'", "max_tokens": 1024, "stream": true, "messages": [',
                b", ".join(self.history),
                b"]}",
            ]
        )
        parts: list[str] = []
        usage: dict[str, Any] = {}
        with _client() as client:
            stream = await client.post(
                "/v1/messages",
                content=body,
                options={"headers": {"Content-Type": "application/json"}},
                cast_to=object,
                stream=True,
                stream_cls=anthropic.AsyncStream[Any],
            )
            async for event in stream:
                kind = event.get("type")
                if kind == "content_block_delta" and event["delta"].get("type") == "text_delta":
                    parts.append(event["delta"]["text"])
                elif kind == "message_start":
                    usage.update(event["message"].get("usage") or {})
                elif kind == "message_delta":
                    usage.update(event.get("usage") or {})
        answer = [{"type": "text", "text": "".join(parts)}]
        frames = await db(_write)(
            self.session,
            "assistant",
            answer,
            [
                ("assistant.delta", {"text": answer[0]["text"]}),
                ("assistant.message", {"content": answer}),
                (
                    "usage",
                    {
                        "input_tokens": usage.get("input_tokens", 0),
                        "output_tokens": usage.get("output_tokens", 0),
                        "cache_creation_input_tokens": usage.get("cache_creation_input_tokens") or 0,
                        "cache_read_input_tokens": usage.get("cache_read_input_tokens") or 0,
                    },
                ),
                ("turn.completed", {"turn_id": turn_id, "stop_reason": "end_turn"}),
            ],
        )
        self.history.append(json.dumps({"role": "assistant", "content": answer}).encode())
        await self.channel_layer.group_send(self.session, {"type": "events", "frames": frames})

    async def events(self, message: dict) -> None:
        for frame in message["frames"]:
            await self.send(frame)

    async def disconnect(self, code: int) -> None:
        if self.session:
            await self.channel_layer.group_discard(self.session, self.channel_name)


_http = get_asgi_application()
application = ProtocolTypeRouter(
    {
        "http": _http,
        "websocket": URLRouter([re_path(r"^ws/agent/$", FloorConsumer.as_asgi())]),
    }
)
