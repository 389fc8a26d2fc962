"""Cancelling a parent whose step started more children than may run at once (issue 31 item 7):
every child's turn ends before the parent's `turn.completed` (the order the database gave their
events), and a child that was waiting for a place is never created."""

from __future__ import annotations

import pytest

from sessions_app.engine import runner
from sessions_app.models import AgentSession, SessionEvent, Turn
from tests.conftest import alist
from tests.fake_anthropic import text
from tests.memory_app.subsessions_support import (
    LEAF,
    MODEL,
    SETTINGS,
    Router,
    child_on,
    leaf,
    report,
    root,
    spawns,
)

pytestmark = pytest.mark.django_db(transaction=True)
# Each model call takes this long in the fake: the cancel comes while the leaves' calls run.
LATENCY_SECONDS = 0.5


async def cancel_while_leaves_run(connect, fake, *, children: int, max_concurrent: int) -> str:
    """The root spawns `children` children, each child one leaf; once `max_concurrent` leaves
    were spawned (their children hold every place), the root's turn is cancelled. The root's id."""
    router = Router().on(leaf, *[report("leaf")] * children)
    for i in range(children):
        router.on(child_on(f"Child {i}."), spawns(LEAF), report("child"))
    router.on(root, spawns(*[f"Child {i}." for i in range(children)]), text("After the cancel."))
    fake.default_reply = router
    fake.latency_seconds = LATENCY_SECONDS
    client = await connect()
    session = await client.create(
        model=MODEL, settings={**SETTINGS, "subsessions": {"max_concurrent": max_concurrent}}
    )
    await client.send({"type": "user.message", "content": "Delegate."})
    leaves_spawned = 0
    while leaves_spawned < max_concurrent:
        frame = await client.recv(10)
        leaves_spawned += frame["type"] == "session.spawned" and frame["session_id"] != session["id"]
    await client.send({"type": "turn.cancel"})
    while True:
        frame = await client.recv(10)
        if frame["type"] == "turn.completed" and frame["session_id"] == session["id"]:
            break
    await client.close()
    assert frame["stop_reason"] == "cancelled"
    return session["id"]


async def test_every_child_ends_before_its_parents_turn_completed(connect, strict_anthropic):
    root_id = await cancel_while_leaves_run(connect, strict_anthropic, children=3, max_concurrent=2)
    await runner.turns_wait_idle(timeout=30)  # whatever would end after the root has ended too
    # The database's order of the turns' ends (events are written in commit order).
    ends = await alist(
        SessionEvent.objects.filter(type="turn.completed").order_by("pk").values_list("session_id", "seq")
    )
    assert str(ends[-1][0]) == root_id
    assert len(ends) == 1 + 2 + 2  # the root, the 2 children that ran, their 2 leaves
    parents = dict(await alist(AgentSession.objects.values_list("id", "parent_session_id")))
    order = [session_id for session_id, _ in ends]
    for session_id in order:
        parent = parents[session_id]
        if parent is not None:
            assert order.index(session_id) < order.index(parent)
    stops = await alist(Turn.objects.values_list("stop_reason", flat=True))
    assert sorted(stops) == ["cancelled"] * 5


async def test_a_child_waiting_for_a_place_is_not_created(connect, strict_anthropic):
    await cancel_while_leaves_run(connect, strict_anthropic, children=4, max_concurrent=2)
    # The root, the two children that had a place and their leaves: the other two calls were
    # abandoned while they waited, and left no session.
    assert await AgentSession.objects.acount() == 1 + 2 + 2
    assert await AgentSession.objects.filter(turns__isnull=True).acount() == 0
    spawned = await alist(
        SessionEvent.objects.filter(type="session.spawned").values_list("payload", flat=True)
    )
    assert len(spawned) == 4
