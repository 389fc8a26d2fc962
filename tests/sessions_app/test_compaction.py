"""Compaction (seeds 002 and 000) through the fake Messages API: what the model receives at each step.

These sessions ask for seed 002's separate summary call (`compaction.summary_call: "separate"`: its
own system prompt, no tools); the default, the summary asked in the session's own layout, is
`test_compaction_shared_summary.py`'s."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from sessions_app.engine.archive import archive_page
from sessions_app.engine.contract import ToolError
from sessions_app.engine.prompts import COMPACTION_SUMMARY_SYSTEM_PROMPT, PRE_COMPACTION_WARNING
from sessions_app.models import AgentSession, Archive, Message, ModelCall
from tests.conftest import alist
from tests.fake_anthropic import FakeAnthropicServer, error, text, tool_use
from tests.sessions_app.conftest import CLIENT_TOOL, NO_MEMORY, is_summary_call

pytestmark = pytest.mark.django_db(transaction=True)
MODEL = "claude-sonnet-4-6"
# About 900 tokens a message: four turns cross a 3,000-token threshold, and the whole history
# still fits one summary call (half of a 10,000-token window).
FILLER = "palimpsest " * 300
SEPARATE = {"compaction": {"summary_call": "separate"}}
SMALL = {"context_window": 10_000, "compact_threshold": 0.3, "settings": {**NO_MEMORY, **SEPARATE}}


async def chat(client, content: str) -> list[dict]:
    await client.send({"type": "user.message", "content": content})
    return await client.until("turn.completed")


async def fill_until_warning(client, fake: FakeAnthropicServer) -> list[dict]:
    for index in range(10):
        frames = await chat(client, f"message {index}: {FILLER}")
        if any(f["type"] == "compaction.warning" for f in frames):
            return frames
    raise AssertionError("no compaction warning")


async def test_warning_reaches_the_model_then_an_independent_summary_then_the_new_epoch(
    connect, fake_anthropic
):
    client = await connect()
    await client.create(model=MODEL, system_prompt="You help.", tools=[CLIENT_TOOL], **SMALL)
    frames = await fill_until_warning(client, fake_anthropic)
    warning = next(f for f in frames if f["type"] == "compaction.warning")
    assert warning["estimated_tokens"] > warning["threshold_tokens"] == 3000
    completed = next(f for f in frames if f["type"] == "compaction.completed")
    types = [f["type"] for f in frames]
    assert (
        types.index("compaction.warning") < types.index("assistant.message") < types.index("session.status")
    )
    assert types.index("session.status") < types.index("compaction.completed")
    assert next(f for f in frames if f["type"] == "session.status")["status"] == "compacting"

    calls = fake_anthropic.requests
    summary_index = next(i for i, r in enumerate(calls) if is_summary_call(r.body))
    warned = calls[summary_index - 1].body
    # The warning step: the seed's text, verbatim, as a user-role notice after the user's message.
    assert warned["messages"][-1]["role"] == "user"
    assert warned["messages"][-1]["content"][-1]["text"] == PRE_COMPACTION_WARNING
    assert warned["tools"] == [CLIENT_TOOL]
    # The summary call: its own system prompt, no tools, the history as a transcript.
    summary_call = calls[summary_index].body
    assert "tools" not in summary_call
    assert summary_call["model"] == MODEL
    transcript = summary_call["messages"][0]["content"][0]["text"]
    # What came before the running turn is summarized; the turn itself and the warning are not.
    running = next(f for f in frames if f["type"] == "user.message")["content"]
    assert "[user] message 0:" in transcript and PRE_COMPACTION_WARNING[:40] not in transcript
    assert running[:20] not in transcript

    assert completed["epoch"] == 1
    assert completed["summary"] == "ok"
    assert completed["tokens_before"] == warning["estimated_tokens"]
    assert 0 < completed["tokens_after"] < completed["tokens_before"]
    assert (completed["trigger"], completed["kept_messages"], completed["masked"]) == ("threshold", 1, [])
    assert completed["duration_ms"] >= 0
    # The turn went on: the call after the summary holds the summary, then the turn's message.
    resumed = calls[summary_index + 1].body["messages"]
    assert resumed[0]["content"][0]["text"].startswith("[Summary of the conversation so far.")
    assert resumed[0]["content"][1]["text"] == running
    assert frames[-1]["stop_reason"] == "end_turn"
    archive = await sync_to_async(Archive.objects.get)()
    assert str(archive.id) == completed["archive_id"]
    assert archive.epoch == 0 and archive.previous is None
    assert archive.message_count == await sync_to_async(Message.objects.filter(epoch=0).count)()

    # The next request starts from the summary, with the same system prompt and tools.
    await chat(client, "what next?")
    after = fake_anthropic.requests[-1].body
    assert after["system"][0]["text"] == "You help."
    assert after["messages"][0]["content"][0]["text"].startswith("[Summary of the conversation so far.")
    assert after["messages"][0]["content"][0]["text"].endswith("\n\nok")
    assert after["messages"][0]["content"][1]["text"] == running
    assert after["messages"][-1]["content"][-1]["text"] == "what next?"
    assert len(after["messages"]) == 3  # summary and the kept turn, its answer, the new question
    assert {t["name"] for t in after["tools"]} == {"client_lookup", "session_archive_read", "recall"}
    await client.close()


async def test_archived_messages_stay_in_place_and_the_summary_carries_the_seed_metadata(
    connect, fake_anthropic
):
    client = await connect()
    await client.create(model=MODEL, **SMALL)
    before: list | None = None
    frames: list[dict] = []
    for index in range(10):
        frames = await chat(client, f"message {index}: {FILLER}")
        if before is None:
            before = await alist(Message.objects.order_by("position").values_list("position", "content"))
        if any(f["type"] == "compaction.completed" for f in frames):
            break
    archive = await sync_to_async(Archive.objects.get)()
    first_epoch = await alist(
        Message.objects.filter(epoch=0).order_by("position").values_list("position", "content")
    )
    assert before is not None and first_epoch[: len(before)] == before
    summary, carried = await alist(Message.objects.filter(epoch=1).order_by("position")[:2])
    assert summary.role == "user"
    assert summary.metadata == {"type": "compact", "previous_archive": str(archive.id)}
    # The running turn's message starts the new epoch verbatim, as a copy of the archived one.
    original = await sync_to_async(Message.objects.get)(epoch=0, position=carried.metadata["from_position"])
    assert carried.metadata["type"] == "carried" and carried.content == original.content
    session = await sync_to_async(AgentSession.objects.get)()
    # The turn went on after compaction: the call that answered it counted the new epoch's prompt.
    assert session.epoch == 1 and session.last_prompt_tokens is not None and session.status == "idle"
    await client.close()


async def test_warning_step_may_use_tools_before_compaction(connect, fake_anthropic):
    client = await connect()
    await client.create(model=MODEL, tools=[CLIENT_TOOL], **SMALL)
    for index in range(3):
        await chat(client, f"message {index}: {FILLER}")

    def warned_then_tool(body):
        last = body["messages"][-1]["content"][-1]
        if last.get("text") == PRE_COMPACTION_WARNING:
            return tool_use("client_lookup", {"q": "save state"})
        return text("ok")

    fake_anthropic.enqueue(warned_then_tool)
    await client.send({"type": "user.message", "content": f"message 3: {FILLER}"})
    frames = await client.until("tool.call")
    assert any(f["type"] == "compaction.warning" for f in frames)
    assert not any(f["type"] == "compaction.completed" for f in frames)
    await client.send({"type": "tool.result", "tool_use_id": frames[-1]["tool_use_id"], "content": "saved"})
    frames = await client.until("turn.completed")
    types = [f["type"] for f in frames]
    assert types.index("tool.result") < types.index("compaction.completed") < types.index("turn.completed")
    # The turn went on after compaction: its next request started from the summary.
    assert fake_anthropic.requests[-1].body["messages"][0]["content"][0]["text"].startswith("[Summary")
    assert frames[-1]["stop_reason"] == "end_turn"
    await client.close()


async def test_a_summary_that_always_fails_leaves_the_session_unchanged_and_the_turn_goes_on(
    connect, fake_anthropic
):
    client = await connect()
    await client.create(model=MODEL, **SMALL)
    for index in range(3):
        await chat(client, f"message {index}: {FILLER}")
    epoch_messages = await sync_to_async(Message.objects.count)()

    def fail_summary(body):
        return error(400, "invalid_request_error", "summary refused") if is_summary_call(body) else text("ok")

    fake_anthropic.default_reply = fail_summary
    frames = await chat(client, f"message 3: {FILLER}")
    assert any(f["type"] == "compaction.warning" for f in frames)
    failed = [f for f in frames if f["type"] == "compaction.failed"]
    assert failed and "summary refused" in failed[0]["message"]
    assert not any(f["type"] == "compaction.completed" for f in frames)
    # The window still had room: the turn answered the user all the same.
    assert frames[-1]["stop_reason"] == "end_turn"
    session = await sync_to_async(AgentSession.objects.get)()
    assert session.epoch == 0 and session.current_turn_id is None
    assert await sync_to_async(Archive.objects.count)() == 0
    # Only the turn's own messages were added: nothing moved or vanished.
    assert await sync_to_async(Message.objects.filter(epoch=0).count)() > epoch_messages
    assert await sync_to_async(Message.objects.filter(epoch__gt=0).count)() == 0
    await client.close()


async def test_prompt_too_long_compacts_at_once_and_retries_the_call_once(connect, fake_anthropic):
    client = await connect()
    await client.create(model=MODEL)  # a large window: the estimate sees no need to compact
    await chat(client, "first")
    fake_anthropic.enqueue(
        error(400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"),
        text("summary of first"),
        text("answered after compaction"),
    )
    frames = await chat(client, "second")
    assert not any(f["type"] == "compaction.warning" for f in frames)
    completed = next(f for f in frames if f["type"] == "compaction.completed")
    assert completed["summary"] == "summary of first"
    assert completed["trigger"] == "prompt_too_long"
    bodies = [r.body for r in fake_anthropic.requests]
    assert is_summary_call(bodies[2]) and not is_summary_call(bodies[3])
    assert bodies[3]["messages"][0]["content"][0]["text"].endswith("summary of first")
    final = [f for f in frames if f["type"] == "assistant.message"][-1]
    assert final["content"][0]["text"] == "answered after compaction"
    await client.close()


async def test_prompt_too_long_twice_ends_the_turn_with_an_error(connect, fake_anthropic):
    client = await connect()
    await client.create(model=MODEL)
    await chat(client, "first")
    too_long = error(400, "invalid_request_error", "prompt is too long: 1 tokens > 0 maximum")
    fake_anthropic.enqueue(too_long, text("summary"), too_long)
    frames = await chat(client, "second")
    assert frames[-1]["stop_reason"] == "error"
    assert len(fake_anthropic.requests) == 4
    await client.close()


async def test_archive_read_returns_the_text_from_before_compaction(connect, fake_anthropic):
    client = await connect()
    await client.create(model=MODEL, **SMALL)
    frames = await fill_until_warning(client, fake_anthropic)
    assert any(f["type"] == "compaction.completed" for f in frames)
    fake_anthropic.enqueue(
        tool_use("session_archive_read", {"query": "message 1:", "limit": 5}), text("found it")
    )
    frames = await chat(client, "what did I say in message 1?")
    result = next(f for f in frames if f["type"] == "tool.result")
    assert result["is_error"] is False
    sent = fake_anthropic.requests[-1].body["messages"][-1]["content"][0]
    assert sent["type"] == "tool_result"
    assert '"total": 1' in sent["content"]
    assert "[user] message 1: palimpsest palimpsest" in sent["content"]
    await client.close()


async def test_archive_read_pages_and_refuses_bad_ranges(connect, fake_anthropic):
    client = await connect()
    session = await client.create(model=MODEL, **SMALL)
    with pytest.raises(ToolError, match="no archive yet"):
        await sync_to_async(archive_page)(session_id=session["id"], offset=0, limit=5, query=None)
    await fill_until_warning(client, fake_anthropic)
    page = await sync_to_async(archive_page)(session_id=session["id"], offset=0, limit=2, query=None)
    assert [m["role"] for m in page["messages"]] == ["user", "assistant"]
    assert page["messages"][0]["text"].startswith("[user] message 0:")
    assert page["next_offset"] == 2 and page["total"] > 2
    last = await sync_to_async(archive_page)(
        session_id=session["id"], offset=page["total"] - 1, limit=5, query=None
    )
    assert last["next_offset"] is None and len(last["messages"]) == 1
    with pytest.raises(ToolError, match="past the end"):
        await sync_to_async(archive_page)(session_id=session["id"], offset=page["total"], limit=5, query=None)
    nothing = await sync_to_async(archive_page)(
        session_id=session["id"], offset=0, limit=5, query="absent words"
    )
    assert nothing["total"] == 0 and nothing["messages"] == []
    await client.close()


async def test_archive_read_argument_errors_reach_the_model(connect, fake_anthropic):
    client = await connect()
    await client.create(model=MODEL, **SMALL)
    await fill_until_warning(client, fake_anthropic)
    fake_anthropic.enqueue(tool_use("session_archive_read", {"limit": 1000}), text("oh"))
    frames = await chat(client, "read it all")
    result = next(f for f in frames if f["type"] == "tool.result")
    assert (
        result["is_error"] is True
        and '"limit" must be an integer from 1 to 100, not 1000' in result["content"]
    )
    await client.close()


async def test_second_and_third_compactions_chain_archives_and_only_the_latest_is_readable(
    connect, fake_anthropic
):
    client = await connect()
    session = await client.create(model=MODEL, **SMALL)
    completed = []
    for index in range(40):
        frames = await chat(client, f"round {index}: {FILLER}")
        completed += [f for f in frames if f["type"] == "compaction.completed"]
        if len(completed) == 3:
            break
    assert [c["epoch"] for c in completed] == [1, 2, 3]
    archives = await alist(Archive.objects.order_by("epoch"))
    assert [a.epoch for a in archives] == [0, 1, 2]
    assert archives[0].previous_id is None
    assert archives[1].previous_id == archives[0].id and archives[2].previous_id == archives[1].id
    page = await sync_to_async(archive_page)(session_id=session["id"], offset=0, limit=100, query=None)
    assert page["archive_id"] == str(archives[2].id)
    assert page["messages"][0]["text"].startswith("[user] [Summary of the conversation so far.")
    await client.close()


async def test_summary_calls_are_recorded_apart_from_the_turn(connect, fake_anthropic):
    client = await connect()
    await client.create(model=MODEL, **SMALL)
    await fill_until_warning(client, fake_anthropic)
    summary = await sync_to_async(ModelCall.objects.get)(purpose="summary")
    assert summary.request["system"] == COMPACTION_SUMMARY_SYSTEM_PROMPT
    assert "tools" not in summary.request
    await client.close()


async def test_a_history_too_large_for_one_call_is_summarized_in_chunks(connect, fake_anthropic):
    client = await connect()
    # The history grows in a large window, which is then made small (as an operator may): the
    # next call finds a history far larger than one summary call can take, and the API refuses it.
    await client.create(model=MODEL, context_window=40_000, compact_threshold=1.0)
    for index in range(8):
        await chat(client, f"part {index}: {FILLER}")
    await sync_to_async(AgentSession.objects.update)(context_window=10_000)
    fake_anthropic.enqueue(
        error(400, "invalid_request_error", "prompt is too long: 12000 tokens > 10000 maximum")
    )
    frames = await chat(client, "and now?")
    summaries = [r.body for r in fake_anthropic.requests if is_summary_call(r.body)]
    assert len(summaries) >= 3  # two parts or more, then the combination
    assert "part 1 of" in summaries[0]["messages"][0]["content"][0]["text"]
    assert "Combine them into one summary" in summaries[-1]["messages"][0]["content"][0]["text"]
    assert any(f["type"] == "compaction.completed" for f in frames)
    await client.close()


async def test_estimate_calibrates_to_the_providers_token_counts(connect, settings):
    with FakeAnthropicServer(token_ratio=1.4) as fake:
        settings.PALIMPSEST_PROVIDER = "anthropic"
        settings.ANTHROPIC_API_KEY = "k"
        settings.ANTHROPIC_BASE_URL = fake.url
        client = await connect()
        await client.create(model=MODEL)
        for index in range(4):
            frames = await chat(client, f"message {index}: {FILLER}")
        session = await sync_to_async(AgentSession.objects.get)()
        assert 1.25 < session.token_ratio < 1.5
        usage = next(f for f in frames if f["type"] == "usage")
        await chat(client, "short")
        actual = fake.requests[-1].usage
        assert actual is not None
        served = (
            actual["input_tokens"] + actual["cache_creation_input_tokens"] + actual["cache_read_input_tokens"]
        )
        # The estimate made before this request (previous prompt + scaled new messages) is close.
        predicted = usage["estimated_next_prompt_tokens"]
        assert abs(predicted - served) / served < 0.1
        await client.close()


async def test_context_window_comes_from_the_models_api_when_the_session_names_none(connect, settings):
    with FakeAnthropicServer(models={"claude-custom-1": 54321}) as fake:
        settings.PALIMPSEST_PROVIDER = "anthropic"
        settings.ANTHROPIC_API_KEY = "k"
        settings.ANTHROPIC_BASE_URL = fake.url
        client = await connect()
        assert (await client.create(model="claude-custom-1"))["context_window"] == 54321
        assert (await client.create(model="claude-custom-1", context_window=9000))["context_window"] == 9000
        assert (await client.create(model="claude-opus-4-6"))["context_window"] == 200_000  # the table
        assert (await client.create(model="claude-unknown-9"))["context_window"] == 128_000
        await client.close()


async def test_scripted_model_compacts_end_to_end_without_a_key(connect):
    client = await connect()
    await client.create(**SMALL)
    for index in range(10):
        frames = await chat(client, f"request {index}: {FILLER}")
        if any(f["type"] == "compaction.completed" for f in frames):
            break
    completed = next(f for f in frames if f["type"] == "compaction.completed")
    assert completed["summary"].startswith("User requests: request 0: palimpsest")
    assert "Last assistant reply:" in completed["summary"]
    frames = await chat(client, "echo still here")
    assert [f for f in frames if f["type"] == "assistant.message"][-1]["content"][0]["text"] == "still here"
    await client.close()


async def test_notepad_and_scratchpad_survive_compaction_and_are_in_the_very_next_request(
    connect, fake_anthropic
):
    client = await connect()
    await client.create(model=MODEL, context_window=10_000, compact_threshold=0.3)
    fake_anthropic.enqueue(
        tool_use("session_scratchpad", {"action": "set_plan", "content": "1. keep going"}),
        tool_use("write_notepad", {"content": "Q3 gap: EMEA rows 234-267"}),
        text("noted"),
    )
    await chat(client, "plan it and note it")
    frames = await fill_until_warning(client, fake_anthropic)
    assert any(f["type"] == "compaction.completed" for f in frames)
    summary_index = max(i for i, r in enumerate(fake_anthropic.requests) if is_summary_call(r.body))
    await chat(client, "next")
    after = fake_anthropic.requests[summary_index + 1].body
    assert after["messages"][0]["content"][0]["text"].startswith("[Summary of the conversation so far.")
    assert any("1. keep going" in block.get("text", "") for block in after["messages"][-1]["content"])
    assert after["system"][-1]["text"] == "## Session Notepad\nQ3 gap: EMEA rows 234-267"
    await client.close()


async def test_an_empty_summary_changes_nothing(connect, fake_anthropic):
    client = await connect()
    await client.create(model=MODEL, **SMALL)
    for index in range(3):
        await chat(client, f"message {index}: {FILLER}")

    def empty_summary(body):
        return text("") if is_summary_call(body) else text("ok")

    fake_anthropic.default_reply = empty_summary
    frames = await chat(client, f"message 3: {FILLER}")
    assert any(f["type"] == "compaction.warning" for f in frames)
    assert "no text" in next(f for f in frames if f["type"] == "compaction.failed")["message"]
    assert await sync_to_async(Archive.objects.count)() == 0
    assert (await sync_to_async(AgentSession.objects.get)()).epoch == 0
    await client.close()


async def test_the_table_wins_over_the_models_api_and_answers_are_remembered(connect, settings):
    with FakeAnthropicServer(models={"claude-opus-4-6": 1_000_000, "claude-custom-2": 77_000}) as fake:
        settings.PALIMPSEST_PROVIDER = "anthropic"
        settings.ANTHROPIC_API_KEY = "k"
        settings.ANTHROPIC_BASE_URL = fake.url
        client = await connect()
        assert (await client.create(model="claude-opus-4-6"))["context_window"] == 200_000
        assert (await client.create(model="claude-custom-2"))["context_window"] == 77_000
        assert (await client.create(model="claude-custom-2"))["context_window"] == 77_000
        assert (await client.create(model="claude-gone-3"))["context_window"] == 128_000
        assert (await client.create(model="claude-gone-3"))["context_window"] == 128_000
        lookups = [r.path for r in fake.other_requests]
        assert lookups == ["/v1/models/claude-custom-2", "/v1/models/claude-gone-3"]
        await client.close()


async def test_no_compaction_when_the_history_cannot_make_room(connect, fake_anthropic):
    client = await connect()
    # The system prompt alone is over the threshold: a summary of the history would not help.
    await client.create(model=MODEL, system_prompt=FILLER * 4, **SMALL)
    for index in range(6):
        frames = await chat(client, f"message {index}")
        assert not any(f["type"].startswith("compaction.") for f in frames)
    assert not any(is_summary_call(r.body) for r in fake_anthropic.requests)
    await client.close()


async def test_the_scripted_model_answers_the_warning_as_the_seed_says(connect):
    client = await connect()
    await client.create(**SMALL)
    for index in range(10):
        frames = await chat(client, f"request {index}: {FILLER}")
        if any(f["type"] == "compaction.warning" for f in frames):
            break
    replies = [f["content"][0]["text"] for f in frames if f["type"] == "assistant.message"]
    # The warning step's answer, then (after compaction) the answer to the user's message.
    assert replies[-2] == "Notepad is up to date."
    assert replies[-1].startswith(f"You said: request {index}: palimpsest")
    await client.close()


def test_the_summary_bound_is_the_setting_a_fifth_of_the_window_and_the_room_left_after_it():
    import uuid

    from sessions_app.engine.compaction.summary import SUMMARY_FLOOR_TOKENS, summary_limit
    from sessions_app.engine.contract import SessionSnapshot
    from sessions_app.engine.features import features

    def snapshot(window: int, **compaction: int) -> SessionSnapshot:
        return SessionSnapshot(
            id=uuid.uuid4(),
            model="scripted",
            system_prompt="",
            context_window=window,
            compact_threshold=0.8,
            settings={"compaction": compaction} if compaction else {},
            defaults=features().default_settings,
        )

    assert summary_limit(snapshot(200_000)) == 2000  # the default setting
    assert summary_limit(snapshot(200_000, summary_max_tokens=120)) == 120  # a lower setting wins
    assert summary_limit(snapshot(4000)) == 800  # a fifth of a small window
    assert summary_limit(snapshot(4000), room=300) == 300  # what the next request leaves
    assert summary_limit(snapshot(4000), room=-50) == SUMMARY_FLOOR_TOKENS


@pytest.mark.parametrize("context_window", [300, 2_000, 9_000, 200_000, 1_000_003])
@pytest.mark.parametrize("last_prompt_tokens", [None, 0, 500, 7_000, 190_000])
@pytest.mark.parametrize("token_ratio", [1.0, 1.3])
def test_fit_limit_is_the_largest_estimate_that_leaves_room_for_an_answer(
    context_window: int, last_prompt_tokens: int | None, token_ratio: float
) -> None:
    """`fit_limit` is the boundary of `output_room`: the largest estimate that leaves
    MIN_OUTPUT_TOKENS, the next one does not (0 when even an empty prompt does not)."""
    import uuid

    from sessions_app.engine.compaction import budget
    from sessions_app.engine.contract import SessionSnapshot

    session = SessionSnapshot(
        id=uuid.uuid4(),
        model="m",
        system_prompt="",
        context_window=context_window,
        compact_threshold=0.8,
        settings={},
        last_prompt_tokens=last_prompt_tokens,
        token_ratio=token_ratio,
    )
    limit = budget.fit_limit(session)
    if budget.output_room(session, 0) < budget.MIN_OUTPUT_TOKENS:
        assert limit == 0
        return
    assert 0 < limit < context_window
    assert budget.output_room(session, limit) >= budget.MIN_OUTPUT_TOKENS
    assert budget.output_room(session, limit + 1) < budget.MIN_OUTPUT_TOKENS
