"""What a fork may copy (issue 31, item 2): bounded by `subsessions.fork_max_tokens` under the
service's PALIMPSEST_FORK_MAX_TOKENS, refused before anything is written with an error the model
can read; and copied inside the database, decided from the messages' outlines, without the
parent's message contents passing through Python."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connection
from django.test.utils import CaptureQueriesContext, override_settings

from memory_app.subsessions import prompts, services
from memory_app.subsessions.services import fork_plan
from sessions_app.common.estimate import estimate_json_tokens
from sessions_app.engine.features import features
from sessions_app.message_content import messages_with_content, resolved
from sessions_app.models import AgentSession, Message, SessionEvent
from sessions_app.selectors import MessageOutline, message_outlines
from tests.fake_anthropic import text
from tests.memory_app.subsessions_support import (
    MODEL,
    SETTINGS,
    Router,
    fork,
    last_results,
    of,
    requests_matching,
    root,
    turn_of,
)

FILLER = "palimpsest " * 300  # about 900 tokens


# -- over the websocket: the model reads the refusal, nothing is created ------------------------
@pytest.mark.django_db(transaction=True)
async def test_a_fork_over_fork_max_tokens_is_a_tool_error_and_creates_nothing(connect, strict_anthropic):
    strict_anthropic.default_reply = Router().on(root, text("ok"), fork("Side work."), text("I will spawn."))
    client = await connect()
    session = await client.create(model=MODEL, settings={**SETTINGS, "subsessions": {"fork_max_tokens": 100}})
    await turn_of(client, session, "Hello.")
    frames = await turn_of(client, session, f"Fork this: {FILLER}")

    parent_id = uuid.UUID(session["id"])
    before_call = await sync_to_async(_tokens_before_last_assistant)(parent_id)
    (block,) = last_results(requests_matching(strict_anthropic, root)[-1])
    assert block["is_error"] is True
    assert block["content"] == prompts.FORK_TOO_LARGE.format(
        tokens=before_call, limit=100, limit_source=prompts.FORK_LIMIT_SESSION
    )
    assert "spawn_session" in block["content"] and "subsessions.fork_max_tokens" in block["content"]
    assert of(frames, session["id"], "session.spawned") == []
    assert await sync_to_async(AgentSession.objects.count)() == 1
    assert frames[-1]["stop_reason"] == "end_turn"
    await client.close()


def _tokens_before_last_assistant(session_id: uuid.UUID) -> int:
    messages = list(Message.objects.filter(session_id=session_id).order_by("position"))
    cut = max(
        m.position for m in messages if m.role == "assistant" and "fork_session" in json.dumps(m.content)
    )
    return sum(m.token_estimate for m in messages if m.position < cut)


@pytest.mark.django_db(transaction=True)
async def test_fork_max_tokens_out_of_range_is_refused_at_create(connect):
    client = await connect()
    for value in (0, 10_000_001):
        await client.send(
            {
                "type": "session.create",
                "model": MODEL,
                "settings": {"subsessions": {"fork_max_tokens": value}},
            }
        )
        frame = await client.recv()
        assert (frame["type"], frame["code"]) == ("error", "invalid_settings")
    await client.close()


# -- the service: limits ------------------------------------------------------------------------
def use(i: str) -> dict:
    return {"type": "tool_use", "id": i, "name": "t", "input": {}}


def result(i: str, body: str = "x") -> dict:
    return {"type": "tool_result", "tool_use_id": i, "content": body}


def words(s: str) -> dict:
    return {"type": "text", "text": s}


def parent_make(contents: list[tuple[str, list[dict]]], **subsessions: Any) -> AgentSession:
    parent = AgentSession.objects.create(
        model=MODEL,
        context_window=200_000,
        settings={"subsessions": subsessions} if subsessions else {},
        next_position=len(contents),
    )
    Message.objects.bulk_create(
        Message(
            session=parent,
            position=position,
            role=role,
            content=content,
            token_estimate=estimate_json_tokens(content),
        )
        for position, (role, content) in enumerate(contents)
    )
    return parent


def fork_of(parent: AgentSession, tool_use_id: str = "toolu_fork") -> AgentSession:
    return services.subsession_create(
        parent_id=parent.pk,
        tool_use_id=tool_use_id,
        mode=services.MODE_FORK,
        task="Side work.",
        settings_defaults=features().default_settings,
    )


def history(big: str = FILLER) -> list[tuple[str, list[dict]]]:
    return [
        ("user", [words(f"Read these. {big}")]),
        ("assistant", [words("Reading."), use("toolu_a")]),
        ("user", [result("toolu_a", f"A: {big}")]),
        ("assistant", [words("Now forking."), use("toolu_fork")]),
    ]


def nothing_created(parent: AgentSession) -> bool:
    return (
        AgentSession.objects.count() == 1
        and Message.objects.exclude(session=parent).count() == 0
        and not SessionEvent.objects.filter(type="session.spawned").exists()
    )


@pytest.mark.django_db(transaction=True)
def test_a_fork_at_its_limit_is_made_and_one_token_over_it_is_refused():
    parent = parent_make(history())
    size = sum(m.token_estimate for m in Message.objects.filter(session=parent, position__lt=3))
    AgentSession.objects.filter(pk=parent.pk).update(settings={"subsessions": {"fork_max_tokens": size - 1}})
    with pytest.raises(services.SubsessionRefused) as refused:
        fork_of(parent)
    assert str(refused.value) == prompts.FORK_TOO_LARGE.format(
        tokens=size, limit=size - 1, limit_source=prompts.FORK_LIMIT_SESSION
    )
    assert nothing_created(parent)
    AgentSession.objects.filter(pk=parent.pk).update(settings={"subsessions": {"fork_max_tokens": size}})
    child = fork_of(parent)
    assert Message.objects.filter(session=child).count() == 3


@pytest.mark.django_db(transaction=True)
def test_the_service_ceiling_cannot_be_raised_by_the_sessions_setting():
    parent = parent_make(history(), fork_max_tokens=10_000_000)
    with (
        override_settings(PALIMPSEST_FORK_MAX_TOKENS=100),
        pytest.raises(services.SubsessionRefused) as refused,
    ):
        fork_of(parent)
    message = str(refused.value)
    assert "at most 100 (the service's ceiling" in message
    assert "subsessions.fork_max_tokens of 10,000,000 cannot raise it" in message
    assert "spawn_session" in message
    assert nothing_created(parent)


# -- the service: the copy is made by the database ----------------------------------------------
_CONTENT_SELECTED = re.compile(
    r'(SELECT|,)\s*(DISTINCT\s+)?"sessions_app_message"\."content"(\s+AS\s+"?\w+"?)?\s*(,|FROM)', re.I
)


# A message's content as `message_content.messages_with_content` reads it.
_RESOLVED_SELECTED = re.compile(r'\)\s+AS\s+"resolved_content"', re.I)


def content_reads(queries: list[dict]) -> list[str]:
    """The statements that fetched a message's content (its column, or resolved) into Python."""
    return [
        q["sql"]
        for q in queries
        if q["sql"].lstrip().upper().startswith("SELECT")
        and (_CONTENT_SELECTED.search(q["sql"]) or _RESOLVED_SELECTED.search(q["sql"]))
    ]


def contents_of(session: AgentSession) -> list[Any]:
    """The session's messages' contents, in order, as every reader sees them."""
    return [
        resolved(m)
        for m in messages_with_content(Message.objects.filter(session=session)).order_by("position")
    ]


@pytest.mark.django_db(transaction=True)
def test_a_fork_copies_its_rows_without_reading_the_parents_contents():
    big = "megabytes of it " * 20_000
    parent = parent_make(history(big), fork_max_tokens=1_000_000)
    with CaptureQueriesContext(connection) as captured:
        child = fork_of(parent)
    assert content_reads(captured.captured_queries) == []
    # The statements do not grow with the history: no statement per message.
    assert not any(big[:200] in q["sql"] for q in captured.captured_queries)
    copied = list(Message.objects.filter(session=child).order_by("position"))
    originals = list(Message.objects.filter(session=parent, position__lt=3).order_by("position"))
    assert [(m.position, m.epoch, m.role, m.token_estimate, m.turn_id) for m in copied] == [
        (i, 0, o.role, o.token_estimate, None) for i, o in enumerate(originals)
    ]
    # Each copy shares its original's content rather than holding it again.
    assert [(m.content, m.content_source_id) for m in copied] == [(None, o.pk) for o in originals]
    assert contents_of(child) == [o.content for o in originals]
    assert [m.metadata for m in copied] == [
        {"type": "forked", "from_session": str(parent.pk), "from_position": i} for i in range(3)
    ]
    assert AgentSession.objects.get(pk=child.pk).next_position == 3


@pytest.mark.django_db(transaction=True)
def test_only_a_message_with_an_orphan_is_read_and_written_with_it_taken_out():
    contents = [
        ("user", [words("Go.")]),
        ("assistant", [words("Two calls."), use("toolu_a"), use("toolu_b")]),
        ("user", [result("toolu_a")]),  # toolu_b's result never came
        ("user", [words("compaction is near")]),
        ("assistant", [use("toolu_fork")]),
    ]
    parent = parent_make(contents)
    Message.objects.filter(session=parent, position=3).update(metadata={"type": "compaction_warning"})
    with CaptureQueriesContext(connection) as captured:
        child = fork_of(parent)
    assert len(content_reads(captured.captured_queries)) == 1
    copied = list(Message.objects.filter(session=child).order_by("position"))
    assert contents_of(child) == [
        [words("Go.")],
        [words("Two calls."), use("toolu_a")],
        [result("toolu_a")],
    ]
    # The one that lost a block holds its own content; the others share their originals'.
    assert [m.content_source_id is None for m in copied] == [False, True, False]
    assert copied[1].token_estimate == estimate_json_tokens(copied[1].content)  # counted again
    assert [m.metadata["from_position"] for m in copied] == [0, 1, 2]


@pytest.mark.django_db(transaction=True)
def test_outlines_name_each_messages_tool_blocks_and_count_its_blocks():
    parent = parent_make(
        [("user", [words("a"), result("r1")]), ("assistant", [words("b"), use("u1"), use("u2")])]
    )
    Message.objects.create(
        session=parent, position=2, role="user", content="a plain string", metadata={"type": "x"}
    )
    assert message_outlines(session_id=parent.pk, epoch=0) == [
        MessageOutline(
            0, "user", "", estimate_json_tokens([words("a"), result("r1")]), 2, [(1, "tool_result", "r1")]
        ),
        MessageOutline(
            1,
            "assistant",
            "",
            estimate_json_tokens([words("b"), use("u1"), use("u2")]),
            3,
            [(1, "tool_use", "u1"), (2, "tool_use", "u2")],
        ),
        MessageOutline(2, "user", "x", 0, 0, []),
    ]


# -- the plan (pure) ----------------------------------------------------------------------------
def outline(
    position: int, role: str, *tool_blocks: tuple[str, str], others: int = 1, kind: str = ""
) -> MessageOutline:
    blocks = [(others + i, k, ident) for i, (k, ident) in enumerate(tool_blocks)]
    return MessageOutline(position, role, kind, 10, others + len(blocks), blocks)


def test_the_plan_stops_before_the_message_holding_the_call_and_drops_the_warning():
    plan = fork_plan(
        [
            outline(0, "user"),
            outline(1, "assistant", ("tool_use", "a")),
            outline(2, "user", ("tool_result", "a"), others=0),
            outline(3, "user", kind="compaction_warning"),
            outline(4, "assistant", ("tool_use", "toolu_fork")),
            outline(5, "user", ("tool_result", "toolu_fork"), others=0),
        ],
        tool_use_id="toolu_fork",
    )
    assert (plan.positions, plan.removed, plan.tokens, plan.tool_result_ids) == ([0, 1, 2], {}, 30, {"a"})


def test_the_plan_takes_out_orphans_by_index_and_leaves_out_an_emptied_message():
    plan = fork_plan(
        [
            outline(0, "user"),
            outline(1, "assistant", ("tool_use", "a"), ("tool_use", "b"), others=0),
            outline(2, "user", ("tool_result", "a"), ("tool_result", "z"), others=0),
            outline(3, "assistant", ("tool_use", "c"), others=0),
        ],
        tool_use_id="toolu_fork",
    )
    # "b" unanswered (index 1), "z" answers nothing (index 1); the trailing "c" alone empties 3.
    assert (plan.positions, plan.removed) == ([0, 1, 2], {1: {1}, 2: {1}})
