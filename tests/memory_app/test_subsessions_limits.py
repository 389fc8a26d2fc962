"""How many sub-sessions there may be (issue 31 item 1): per step, per tree, per client, the
service's ceilings that a session's settings cannot raise, and the sessions-per-minute quota,
which children count against. A call over a bound gets a tool error the model can read, and
nothing is created for it."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async

from sessions_app.models import AgentSession, SessionEvent
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
    turn_of,
)

pytestmark = pytest.mark.django_db(transaction=True)


def tree_router(children: int, leaves_each: int) -> Router:
    """The root spawns `children` children in its first step; each child spawns `leaves_each`
    leaves in its first step, then reports; a leaf reports at once."""
    router = Router().on(leaf, *[report("leaf done")] * (children * leaves_each))
    for i in range(children):
        first = [spawns(*[LEAF] * leaves_each)] if leaves_each else []
        router.on(child_on(f"Child {i}."), *first, report(f"child {i} done"))
    return router.on(root, spawns(*[f"Child {i}." for i in range(children)]), text("All done."))


async def run_tree(connect, fake, router: Router, token: str | None = None, **subsessions: int) -> dict:
    fake.default_reply = router
    client = await connect(token)
    session = await client.create(model=MODEL, settings={**SETTINGS, "subsessions": subsessions})
    frames = await turn_of(client, session, "Delegate.")
    assert frames[-1]["stop_reason"] == "end_turn"
    await client.close()
    return session


async def sub_sessions() -> int:
    return await AgentSession.objects.filter(depth__gte=1).acount()


async def refusals(marker: str) -> list[str]:
    """The spawn calls answered with an error that holds `marker`."""
    results = await alist(SessionEvent.objects.filter(type="tool.result").values_list("payload", flat=True))
    return [
        str(r["content"])
        for r in results
        if r.get("name") == "spawn_session" and r.get("is_error") and marker in str(r["content"])
    ]


def root_results(fake) -> list[dict]:
    """The tool results of the root's spawn calls, as its second request shows them."""
    body = [r.body for r in fake.requests if root(r.body)][-1]
    return [b for b in body["messages"][-1]["content"] if b.get("type") == "tool_result"]


async def test_a_step_starts_at_most_max_per_step_children_and_the_rest_get_a_readable_error(
    connect, strict_anthropic
):
    # The root asks for 5 children, each child for 4 leaves; a step may start 3.
    await run_tree(connect, strict_anthropic, tree_router(5, 4), max_per_step=3)
    assert await sub_sessions() == 3 + 3 * 3
    results = root_results(strict_anthropic)
    assert [r.get("is_error", False) for r in results] == [False, False, False, True, True]
    assert json.loads(results[0]["content"])["status"] == "reported"
    error = results[3]["content"]
    assert "call 4 of this step" in error
    assert "at most 3 sub-sessions (subsessions.max_per_step is 3)" in error
    assert "delegate the rest in a later step" in error
    # Each child's 4th call was refused too, and no model call was made for a refused one: the
    # root's 2, 2 for each of 3 children, 1 for each of 9 leaves.
    assert len(await refusals("subsessions.max_per_step is 3")) == 2 + 3
    assert len(strict_anthropic.requests) == 2 + 3 * 2 + 9


async def test_a_tree_holds_at_most_max_per_tree_sub_sessions(connect, strict_anthropic):
    # 3 children, then 9 leaves asked for; the tree may hold 5.
    await run_tree(connect, strict_anthropic, tree_router(3, 3), max_per_tree=5)
    assert await sub_sessions() == 5
    refused = await refusals("subsessions.max_per_tree is 5")
    assert len(refused) == 3 + 9 - 5
    assert "already holds 5 sub-sessions" in refused[0]
    assert "nothing was started" in refused[0]


async def test_the_service_ceilings_cannot_be_raised_by_a_sessions_settings(
    connect, strict_anthropic, settings
):
    settings.PALIMPSEST_SUBSESSIONS_MAX_PER_STEP = 2
    settings.PALIMPSEST_SUBSESSIONS_MAX_PER_TREE = 3
    # The session asks for more than either ceiling: 8 a step, 50 a tree.
    await run_tree(connect, strict_anthropic, tree_router(4, 2), max_per_step=8, max_per_tree=50)
    assert await sub_sessions() == 3
    results = root_results(strict_anthropic)
    assert [r.get("is_error", False) for r in results] == [False, False, True, True]
    assert "the service's ceiling PALIMPSEST_SUBSESSIONS_MAX_PER_STEP is 2" in results[2]["content"]
    assert "subsessions.max_per_step (8) cannot raise it" in results[2]["content"]
    tree = await refusals("the service's ceiling PALIMPSEST_SUBSESSIONS_MAX_PER_TREE is 3")
    assert len(tree) == 2 * 2 - 1


async def test_a_client_has_at_most_max_per_client_sub_sessions_across_its_trees(
    connect, make_token, strict_anthropic
):
    token = await make_token()
    await run_tree(connect, strict_anthropic, tree_router(3, 0), token, max_per_client=2)
    assert await sub_sessions() == 2
    # Another tree of the same token, within the minute: its children count with the first's.
    await run_tree(connect, strict_anthropic, tree_router(1, 0), token, max_per_client=2)
    assert await sub_sessions() == 2
    refused = await refusals("subsessions.max_per_client is 2")
    assert len(refused) == 2
    assert "already has 2 sub-sessions running or started in the last minute" in refused[0]
    # Another client is not held back by this one.
    await run_tree(connect, strict_anthropic, tree_router(1, 0), None, max_per_client=2)
    assert await sub_sessions() == 3


async def test_spawns_count_in_the_sessions_per_minute_quota(connect, make_token, strict_anthropic, settings):
    settings.PALIMPSEST_QUOTA_SESSIONS_PER_MINUTE = 3
    token = await make_token()
    # The root is the first session of the minute: 2 of its 4 children fit.
    await run_tree(connect, strict_anthropic, tree_router(4, 0), token)
    assert await sub_sessions() == 2
    refused = await refusals("PALIMPSEST_QUOTA_SESSIONS_PER_MINUTE is 3")
    assert len(refused) == 2
    assert "created 3 sessions in the last minute" in refused[0]
    # The children were counted: the client's next session.create is over the quota.
    client = await connect(token)
    await client.send({"type": "session.create", "request_id": "next"})
    reply = await client.recv()
    assert (reply["code"], reply["request_id"]) == ("rate_limited", "next")
    await client.close()
    assert await sync_to_async(AgentSession.objects.count)() == 3


@pytest.mark.parametrize(
    "subsessions",
    [{"max_per_step": 0}, {"max_per_step": 65}, {"max_per_tree": 0}, {"max_per_client": "many"}],
)
async def test_a_fan_out_setting_out_of_its_range_is_refused(connect, subsessions):
    client = await connect()
    await client.send({"type": "session.create", "settings": {"subsessions": subsessions}})
    reply = await client.recv()
    assert (reply["type"], reply["code"]) == ("error", "invalid_settings")
    await client.close()
    assert await AgentSession.objects.acount() == 0


async def test_the_defaults_bound_a_tree_to_50_sub_sessions(connect, strict_anthropic):
    # The attack of issue 31: every session's first step asks for as many children as it can.
    await run_tree(connect, strict_anthropic, tree_router(8, 8))
    # 8 children (the default per step), then 42 of their 64 leaves (the default per tree).
    assert await sub_sessions() == 50
