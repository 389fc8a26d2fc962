"""Re-attaching to a large tree sends a bounded page of it (issue 31, item 9): `session.attach`
follows and replays at most PALIMPSEST_ATTACH_DESCENDANTS descendants (or `descendants_limit`),
shallowest and oldest first, says how many there are and whether more exist, and
`session.follow` brings in the next ones, or the ones named. Counted in frames and bytes."""

from __future__ import annotations

import json
import uuid

import pytest
from asgiref.sync import sync_to_async

from sessions_app.models import AgentSession, AgentToken, SessionEvent
from tests.conftest import alist

pytestmark = pytest.mark.django_db(transaction=True)
CHILDREN = 250
EVENTS_EACH = 4  # a child's turn: user.message, turn.started, assistant.message, turn.completed


def _tree(root_id: str) -> list[str]:
    """CHILDREN finished children under the root, each with EVENTS_EACH events, and the root's
    `session.spawned` for each (as a turn that spawned them leaves them). Returns their ids."""
    root = AgentSession.objects.get(pk=root_id)
    children = [
        AgentSession(
            owner_id=root.owner_id,
            title=f"child {n}",
            model=root.model,
            context_window=root.context_window,
            settings=root.settings,
            parent_session=root,
            root_session=root,
            depth=1,
            last_seq=EVENTS_EACH,
        )
        for n in range(CHILDREN)
    ]
    AgentSession.objects.bulk_create(children)
    events = [
        SessionEvent(
            session=child,
            seq=seq,
            type="assistant.message",
            payload={"content": [{"type": "text", "text": f"step {seq}"}]},
        )
        for child in children
        for seq in range(1, EVENTS_EACH + 1)
    ]
    events += [
        SessionEvent(
            session=root,
            seq=n + 1,
            type="session.spawned",
            payload={
                "child_session_id": str(child.pk),
                "mode": "spawn",
                "tool_use_id": f"t{n}",
                "title": child.title,
            },
        )
        for n, child in enumerate(children)
    ]
    SessionEvent.objects.bulk_create(events)
    AgentSession.objects.filter(pk=root.pk).update(last_seq=CHILDREN)
    return [str(child.pk) for child in children]


async def _attach(client, frame: dict) -> tuple[list[dict], int]:
    """The frames up to `session.attached` (or `session.followed`) and their bytes."""
    await client.send(frame)
    frames, size = [], 0
    while True:
        raw = await client.ws.receive_from(timeout=10)
        size += len(raw.encode())
        frames.append(json.loads(raw))
        if frames[-1]["type"] in ("session.attached", "session.followed", "error"):
            return frames, size


async def _root_with_tree(connect) -> tuple:
    client = await connect()
    session = await client.create()
    children = await sync_to_async(_tree)(session["id"])
    return client, session, children


def _children_replayed(frames: list[dict], root_id: str) -> set[str]:
    return {f["session_id"] for f in frames if "seq" in f and f["session_id"] != root_id}


async def test_an_attach_replays_a_bounded_page_of_a_large_tree(connect, settings):
    settings.PALIMPSEST_ATTACH_DESCENDANTS = 20
    client, session, children = await _root_with_tree(connect)
    frames, size = await _attach(client, {"type": "session.attach", "session_id": session["id"]})
    attached = frames[-1]
    replayed = _children_replayed(frames, session["id"])
    assert replayed == set(children[:20])  # the oldest first
    events = [f for f in frames if "seq" in f]
    assert len(events) == CHILDREN + 20 * EVENTS_EACH  # the root's own, then 20 children's
    assert [d["session_id"] for d in attached["descendants"]] == children[:20]
    assert {d["last_seq"] for d in attached["descendants"]} == {EVENTS_EACH}
    assert (attached["descendants_total"], attached["descendants_more"]) == (CHILDREN, True)
    unbounded = CHILDREN + CHILDREN * EVENTS_EACH
    print(f"\nattach: {len(frames)} frames, {size} bytes (all of the tree: {unbounded + 1} frames)")
    assert len(frames) == len(events) + 1
    await client.close()


async def test_session_follow_brings_the_next_pages_until_none_is_left(connect, settings):
    settings.PALIMPSEST_ATTACH_DESCENDANTS = 100
    client, session, children = await _root_with_tree(connect)
    frames, _ = await _attach(
        client, {"type": "session.attach", "session_id": session["id"], "descendants_limit": 40}
    )
    seen = _children_replayed(frames, session["id"])
    pages = [len(seen)]
    while frames[-1]["descendants_more"]:
        frames, _ = await _attach(client, {"type": "session.follow", "limit": 100, "request_id": "p"})
        assert frames[-1]["type"] == "session.followed"
        page = _children_replayed(frames, session["id"])
        assert not page & seen  # nothing twice
        assert {d["session_id"] for d in frames[-1]["descendants"]} == page
        seen |= page
        pages.append(len(page))
    assert pages == [40, 100, 100, 10]
    assert seen == set(children)
    assert frames[-1]["descendants_total"] == CHILDREN
    await client.close()


async def test_session_follow_takes_the_descendants_a_client_names(connect, settings):
    client, session, children = await _root_with_tree(connect)
    await _attach(client, {"type": "session.attach", "session_id": session["id"], "descendants_limit": 0})
    wanted = [children[-1], children[100]]
    frames, _ = await _attach(
        client,
        {"type": "session.follow", "session_ids": wanted, "since_seqs": {children[100]: 2}},
    )
    events = [(f["session_id"], f["seq"]) for f in frames if "seq" in f]
    assert sorted(events) == sorted(
        [(children[100], 3), (children[100], 4)] + [(children[-1], s) for s in range(1, EVENTS_EACH + 1)]
    )
    assert frames[-1]["descendants_more"] is True
    await client.close()


async def test_a_v1_attach_of_a_small_tree_is_unchanged(connect):
    """Under the default page (100) everything is replayed and listed, as before."""
    client = await connect()
    session = await client.create()
    token = await sync_to_async(AgentToken.objects.get)()
    root = await AgentSession.objects.aget(pk=session["id"])
    child = await AgentSession.objects.acreate(
        owner=token,
        model=root.model,
        context_window=root.context_window,
        parent_session=root,
        root_session=root,
        depth=1,
        last_seq=1,
    )
    await SessionEvent.objects.acreate(
        session=child, seq=1, type="turn.started", payload={"turn_id": str(uuid.uuid4())}
    )
    frames, _ = await _attach(client, {"type": "session.attach", "session_id": session["id"]})
    assert [(f["session_id"], f["seq"]) for f in frames if "seq" in f] == [(str(child.pk), 1)]
    attached = frames[-1]
    assert [d["session_id"] for d in attached["descendants"]] == [str(child.pk)]
    assert (attached["descendants_total"], attached["descendants_more"]) == (1, False)
    assert await alist(AgentSession.objects.filter(depth=1).values_list("pk", flat=True)) == [child.pk]
    await client.close()


def test_by_default_a_tree_the_service_lets_grow_fits_one_page():
    """A v1 client knows nothing of session.follow: with the default settings it must still see
    every descendant, so one page holds the largest tree the service allows."""
    from django.conf import settings

    assert settings.PALIMPSEST_ATTACH_DESCENDANTS >= settings.PALIMPSEST_SUBSESSIONS_MAX_PER_TREE
