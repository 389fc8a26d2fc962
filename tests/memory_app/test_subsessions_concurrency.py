"""Several spawn calls in one step run their children at the same time, at most
`subsessions.max_concurrent` of them at once; results keep the model's order."""

from __future__ import annotations

import json

import pytest

from tests.fake_anthropic import RecordedRequest, Reply, text
from tests.memory_app.subsessions_support import (
    MODEL,
    SETTINGS,
    Router,
    assert_every_request_valid,
    child_on,
    last_results,
    of,
    report,
    requests_matching,
    root,
    turn_of,
)

pytestmark = pytest.mark.django_db(transaction=True)
# Each model call takes this long in the fake, so calls made at the same time overlap.
LATENCY_SECONDS = 0.3


def spawns(*tasks: str) -> Reply:
    return Reply(
        [
            {"type": "tool_use", "id": f"toolu_spawn{i}", "name": "spawn_session", "input": {"task": task}}
            for i, task in enumerate(tasks)
        ],
        stop_reason="tool_use",
    )


def calls_of(fake, task: str) -> list[RecordedRequest]:
    return [r for r in fake.requests if child_on(task)(r.body)]


async def run(connect, fake, tasks: tuple[str, ...], **subsessions: int) -> list[dict]:
    router = Router()
    for task in tasks:
        router.on(child_on(task), report(f"done: {task}"))
    router.on(root, spawns(*tasks), text("All done."))
    fake.default_reply = router
    fake.latency_seconds = LATENCY_SECONDS
    client = await connect()
    session = await client.create(model=MODEL, settings={**SETTINGS, "subsessions": subsessions})
    frames = await turn_of(client, session, "Do these in parallel.")
    await client.close()
    assert frames[-1]["stop_reason"] == "end_turn"
    assert len(of(frames, session["id"], "session.spawned")) == len(tasks)
    return frames


async def test_two_children_of_one_step_call_their_models_at_the_same_time(connect, strict_anthropic):
    await run(connect, strict_anthropic, ("Task A.", "Task B."))
    (a,) = calls_of(strict_anthropic, "Task A.")
    (b,) = calls_of(strict_anthropic, "Task B.")
    # Overlapping: each call started before the other one ended.
    assert a.started < b.ended and b.started < a.ended
    assert_every_request_valid(strict_anthropic)


async def test_results_keep_the_models_order(connect, strict_anthropic):
    await run(connect, strict_anthropic, ("First.", "Second.", "Third."))
    results = last_results(requests_matching(strict_anthropic, root)[-1])
    assert [b["tool_use_id"] for b in results] == ["toolu_spawn0", "toolu_spawn1", "toolu_spawn2"]
    assert [json.loads(b["content"])["result"] for b in results] == [
        "done: First.",
        "done: Second.",
        "done: Third.",
    ]


async def test_children_over_max_concurrent_wait_for_a_place_and_are_not_refused(connect, strict_anthropic):
    tasks = ("One.", "Two.", "Three.")
    await run(connect, strict_anthropic, tasks, max_concurrent=1)
    calls = sorted((calls_of(strict_anthropic, task)[0] for task in tasks), key=lambda r: r.started)
    # One at a time: each child's model call starts after the previous one ended.
    for earlier, later in zip(calls, calls[1:], strict=False):
        assert earlier.ended <= later.started
    results = last_results(requests_matching(strict_anthropic, root)[-1])
    assert [json.loads(b["content"])["status"] for b in results] == ["reported"] * 3


def overlapping_at_most(calls: list[RecordedRequest]) -> int:
    """The most of `calls` in flight at one moment."""
    edges = sorted([(c.started, 1) for c in calls] + [(c.ended, -1) for c in calls])
    running = most = 0
    for _, step in edges:
        running += step
        most = max(most, running)
    return most


async def test_the_services_ceiling_bounds_max_concurrent(connect, strict_anthropic, settings):
    """A session asking for 8 at once gets PALIMPSEST_SUBSESSIONS_MAX_CONCURRENT (here 2): its
    settings cannot raise the service's ceiling."""
    settings.PALIMPSEST_SUBSESSIONS_MAX_CONCURRENT = 2
    tasks = ("One.", "Two.", "Three.", "Four.")
    await run(connect, strict_anthropic, tasks, max_concurrent=8)
    calls = [calls_of(strict_anthropic, task)[0] for task in tasks]
    assert overlapping_at_most(calls) == 2
