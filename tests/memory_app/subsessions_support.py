"""Helpers shared by the sub-session tests: routing the fake model's answers by session, and
following one session's frames on a connection that also receives its children's."""

from __future__ import annotations

import threading
import uuid
from collections import deque
from collections.abc import Callable
from typing import Any

from memory_app.subsessions.prompts import CHILD_GUIDANCE
from tests.fake_anthropic import Reply, ReplySpec, strict_problems, text, tool_use

MODEL = "claude-sonnet-4-6"
# Small requests: the scratchpad's block is not what these tests are about (forks test it).
SETTINGS: dict[str, Any] = {"scratchpad": {"enabled": False}}

Matcher = Callable[[dict], bool]


def spawn(task: str, **fields: Any) -> Reply:
    return tool_use("spawn_session", {"task": task, **fields})


def fork(task: str, **fields: Any) -> Reply:
    return tool_use("fork_session", {"task": task, **fields})


def spawns(*tasks: str) -> Reply:
    """One step of spawn_session calls, one per task, in this order (ids unique per call)."""
    return Reply(
        [
            {
                "type": "tool_use",
                "id": f"toolu_{uuid.uuid4().hex[:24]}",
                "name": "spawn_session",
                "input": {"task": task},
            }
            for task in tasks
        ],
        stop_reason="tool_use",
    )


# The task of a child that spawns nothing (`leaf` routes its requests).
LEAF = "Leaf task."


def leaf(body: dict) -> bool:
    return is_child(body) and LEAF in user_texts(body)


def report(result: str) -> Reply:
    return tool_use("report_result", {"result": result})


def system_text(body: dict) -> str:
    system = body.get("system") or []
    return system if isinstance(system, str) else "\n".join(b.get("text", "") for b in system)


def user_texts(body: dict) -> list[str]:
    """Every text block of the request's user messages, in order."""
    return [
        b.get("text", "")
        for m in body.get("messages", [])
        if m["role"] == "user" and isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "text"
    ]


def tool_names(body: dict) -> list[str]:
    return [t["name"] for t in body.get("tools", [])]


def is_child(body: dict) -> bool:
    return CHILD_GUIDANCE in system_text(body)


def child_on(task: str) -> Matcher:
    """A request of the child whose task (a user message) is `task`."""
    return lambda body: is_child(body) and task in user_texts(body)


def root(body: dict) -> bool:
    return not is_child(body)


def last_results(body: dict) -> list[dict]:
    """The tool_result blocks of the request's last message."""
    return [b for b in body["messages"][-1]["content"] if b.get("type") == "tool_result"]


class Router:
    """The fake model's answers per session: routes tried in order, each a matcher on the request
    and the replies for the requests it matches, one each. Unmatched or exhausted: "ok"."""

    def __init__(self) -> None:
        self.routes: list[tuple[Matcher, deque[ReplySpec]]] = []
        self.lock = threading.Lock()

    def on(self, matcher: Matcher, *replies: ReplySpec) -> Router:
        self.routes.append((matcher, deque(replies)))
        return self

    def __call__(self, body: dict) -> Reply:
        with self.lock:
            spec: ReplySpec = text("ok")
            for matcher, replies in self.routes:
                if replies and matcher(body):
                    spec = replies.popleft()
                    break
        reply = spec(body) if callable(spec) else spec
        assert isinstance(reply, Reply)
        return reply

    @property
    def pending(self) -> int:
        return sum(len(replies) for _, replies in self.routes)


def requests_matching(fake: Any, matcher: Matcher) -> list[dict]:
    return [r.body for r in fake.requests if matcher(r.body)]


def assert_every_request_valid(fake: Any) -> None:
    """What the strict fake checked, checked again here: no request had orphan tool_use."""
    for recorded in fake.requests:
        assert strict_problems(recorded.body) == [], recorded.body["messages"]


async def until_of(client: Any, frame_type: str, session_id: str, timeout: float = 10) -> list[dict]:
    """Frames up to and including the first `frame_type` of session `session_id`."""
    frames = []
    while True:
        frame = await client.recv(timeout)
        frames.append(frame)
        if frame["type"] == frame_type and frame.get("session_id") == session_id:
            return frames


async def turn_of(client: Any, session: dict, content: str) -> list[dict]:
    """Send a user message to the attached session and return every frame (children's included)
    up to its `turn.completed`."""
    await client.send({"type": "user.message", "content": content})
    return await until_of(client, "turn.completed", session["id"])


def of(frames: list[dict], session_id: str, frame_type: str | None = None) -> list[dict]:
    return [
        f
        for f in frames
        if f.get("session_id") == session_id and (frame_type is None or f["type"] == frame_type)
    ]
