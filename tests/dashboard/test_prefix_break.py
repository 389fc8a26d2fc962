"""The prompt inspector's prefix breaks (issue 32, item 3): where each request stopped sharing the
previous request's prefix, why, and what came after; from real turns of the scripted model and,
for the bad cases, from model call records written here."""

from __future__ import annotations

import re
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.utils import timezone

from sessions_app import selectors as session_selectors
from sessions_app.dashboard import selectors
from sessions_app.engine import runner
from sessions_app.engine.operator import compaction_operator_start
from sessions_app.models import AgentSession, Archive, MaskedResult, ModelCall, RequestPart
from tests.dashboard.conftest import chat, message_store, session_new


def calls_of(session: AgentSession, purpose: str = "turn") -> list[ModelCall]:
    return list(ModelCall.objects.filter(session=session, purpose=purpose).order_by("started_at", "pk"))


def break_of(call: ModelCall) -> selectors.PrefixBreak | None:
    return selectors.prefix_break(call=call, body=session_selectors.model_call_request(call=call))


def inspector(client: Any, call: ModelCall) -> str:
    return client.get(f"/sessions/{call.session_id}/inspector/?call={call.pk}").content.decode()


def summary_of(html: str) -> str:
    return re.sub(r"\s+", " ", html.split('id="prefix-summary"', 1)[1].split("</p>", 1)[0])


def compact(session: AgentSession) -> None:
    async def run() -> None:
        await compaction_operator_start(session_id=session.pk)
        await runner.turns_wait_idle(timeout=10)

    async_to_sync(run)()


# ---------------------------------------------------------------------------
# Real turns of the scripted model
# ---------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_the_first_request_has_nothing_to_compare_with(operator_client):
    session = session_new()
    chat(session.pk, "hello")
    (call,) = calls_of(session)
    assert break_of(call) is None
    html = inspector(operator_client, call)
    assert 'data-reason="first"' in html and "The first turn request of this session" in html
    assert "prefix broke here" not in html


@pytest.mark.django_db(transaction=True)
def test_a_request_that_extends_the_previous_one_has_no_break(operator_client):
    session = session_new()
    chat(session.pk, "hello")
    chat(session.pk, "again")
    first, second = calls_of(session)
    found = break_of(second)
    assert found is not None and found.previous_id == first.pk
    # It shares everything the first sent (tools, system, the first message) and adds two.
    assert (found.reason, found.where, found.index) == ("", "messages", 1)
    assert found.total_blocks - found.shared_blocks == 2
    assert 0 < found.tokens_after < second.prompt_tokens
    html = inspector(operator_client, second)
    assert "Prefix shared: this request extends the previous one" in summary_of(html)
    assert html.count('data-break="new"') == 1 and "prefix-break-mark" not in html


@pytest.mark.django_db(transaction=True)
def test_a_notepad_edit_breaks_the_prefix_in_the_system_prompt_as_memory(operator_client):
    session = session_new(system_prompt="You audit.", settings={"notepad": {"position": "system"}})
    chat(session.pk, "remember: the deadline is <b>Friday</b>")
    before, after = calls_of(session)  # the call that wrote the notepad, the one after it
    found = break_of(after)
    assert found is not None and (found.where, found.index, found.reason) == ("system", 1, "memory")
    assert found.detail == "per-call section changed: ## Session Notepad"
    # The tools and the stable system prompt are shared; the notepad and every message are not.
    body = session_selectors.model_call_request(call=after)
    assert found.shared_blocks == len(body["tools"]) + 1
    sent = session.messages.filter(position__lt=len(body["messages"]))
    messages = sum(m.token_estimate for m in sent)
    assert messages < found.tokens_after < after.prompt_tokens
    html = inspector(operator_client, after)
    summary = summary_of(html)
    assert f"Prefix shared up to block {found.shared_blocks} of {found.total_blocks}" in summary
    assert 'broke at <span class="mono">system[1]</span> — <strong>memory</strong>' in summary
    assert f"{found.tokens_after:,} tokens after" in summary
    assert html.count('data-break="memory"') == 1
    # The mark is on the notepad's block, the one that changed.
    marked = html.split('data-break="memory"', 1)[0].rsplit('<div class="req-block', 1)[1]
    assert "## Session Notepad" in marked and "&lt;b&gt;Friday&lt;/b&gt;" in marked


@pytest.mark.django_db(transaction=True)
def test_a_per_call_scratchpad_block_of_the_previous_request_is_a_memory_break():
    session = session_new(settings={"scratchpad": {"enabled": True}})
    chat(session.pk, "plan: check; fix")
    chat(session.pk, "hello")
    found = break_of(calls_of(session)[-1])
    assert found is not None and (found.where, found.reason) == ("messages", "memory")
    assert found.detail.startswith("per-call block of the previous request: [Session Scratchpad")


@pytest.mark.django_db(transaction=True)
def test_the_notepad_in_message_position_is_a_memory_break_in_the_messages():
    session = session_new(settings={"notepad": {"position": "message"}})
    chat(session.pk, "remember: the deadline")
    found = break_of(calls_of(session)[-1])
    assert found is not None and (found.where, found.reason) == ("messages", "memory")
    assert found.detail == "per-call block of the previous request: ## Session Notepad"


@pytest.mark.django_db(transaction=True)
def test_the_notepad_pinned_per_epoch_changes_no_system_block_and_its_update_breaks_nothing():
    # Its change is anchored where it was first shown: the requests after it send it there again.
    session = session_new(settings={"notepad": {"position": "epoch"}})
    chat(session.pk, "remember: alpha")
    chat(session.pk, "hello")
    calls = calls_of(session)
    found = [b for b in map(break_of, calls) if b is not None]
    assert all(b.where != "system" for b in found)
    assert not any("The session notepad has changed" in b.detail for b in found)
    last = session_selectors.model_call_request(call=calls[-1])
    earlier = [b.get("text", "") for m in last["messages"][:-1] for b in m["content"]]
    assert any(text.startswith("The session notepad has changed") for text in earlier)


@pytest.mark.django_db(transaction=True)
def test_masking_is_named_where_it_broke_the_prefix(django_assert_max_num_queries):
    """A small window and big tool results (the notepad, read back): each batch of masks
    rewrites the history from the first masked result."""
    # mask_low_water 1.0: masking whenever it brings the request under the threshold (by default
    # a batch that cannot reach the low-water mark gives way to a summary).
    session = session_new(context_window=12000, settings={"compaction": {"mask_low_water": 1.0}})
    chat(session.pk, "remember: " + " ".join(f"fact{i}" for i in range(400)))
    for _ in range(8):
        chat(session.pk, "notepad")
    found = {call.pk: break_of(call) for call in calls_of(session)}
    masking = [b for b in found.values() if b is not None and b.reason == "masking"]
    assert masking
    masked_ids = set(MaskedResult.objects.filter(session=session).values_list("tool_use_id", flat=True))
    for item in masking:
        masked = item.detail.removeprefix("tool result ").removesuffix(" masked")
        assert item.where == "messages" and masked in masked_ids
    # Cheap: a handful of queries, from the records (the inspector's rebuild aside).
    masked_call = next(
        call for call in reversed(calls_of(session)) if (b := found[call.pk]) and b.reason == "masking"
    )
    body = session_selectors.model_call_request(call=masked_call)
    with django_assert_max_num_queries(6):
        assert selectors.prefix_break(call=masked_call, body=body) == found[masked_call.pk]


@pytest.mark.django_db(transaction=True)
def test_a_finished_task_collapsing_its_calls_is_a_task_break():
    session = session_new(settings={"tasks": {"enabled": True}})
    chat(session.pk, "task checks: count the words")
    reasons = [(b.reason, b.detail) for b in map(break_of, calls_of(session)) if b is not None and b.reason]
    assert ("task", "a finished task collapsed: 1 tool call of the previous request gone") in reasons


@pytest.mark.django_db(transaction=True)
def test_a_compaction_between_two_calls_is_named(operator_client):
    session = session_new()
    chat(session.pk, "first")
    compact(session)
    chat(session.pk, "second")
    # The first compaction adds session_archive_read and recall: the tools change first.
    found = break_of(calls_of(session)[-1])
    assert found is not None and (found.reason, found.where, found.index) == ("tools", "tools", 0)
    assert found.detail == "added session_archive_read, recall; after a compaction"
    compact(session)
    chat(session.pk, "third")
    found = break_of(calls_of(session)[-1])
    archive = Archive.objects.filter(session=session).latest("epoch")
    assert found is not None and found.reason == "compaction"
    assert found.detail == f"epoch {archive.epoch} was archived before this call"
    # A summary call in the session's layout (the default) is compared with the turn's call
    # before it (the warning step), and parts from it at its question.
    summaries = calls_of(session, "summary")
    found = break_of(summaries[-1])
    turn_before = [c for c in calls_of(session) if c.started_at <= summaries[-1].started_at][-1]
    assert found is not None and found.previous_id == turn_before.pk
    assert found.reason == "compaction" and "question" in found.detail


@pytest.mark.django_db(transaction=True)
def test_a_separate_summary_call_is_compared_with_the_summary_call_before_it(operator_client):
    session = session_new(settings={"compaction": {"summary_call": "separate"}})
    for word in ("first", "second"):
        chat(session.pk, word)
        compact(session)
    summaries = calls_of(session, "summary")
    found = break_of(summaries[-1])
    assert found is not None and found.previous_id == summaries[0].pk


# ---------------------------------------------------------------------------
# Records written here: the bad cases
# ---------------------------------------------------------------------------
def call_new(session: AgentSession, request: dict, **fields: Any) -> ModelCall:
    return ModelCall.objects.create(
        session=session,
        provider=fields.pop("provider", "anthropic"),
        model=session.model,
        request=request,
        request_sha256="",
        started_at=fields.pop("started_at", timezone.now()),
        **fields,
    )


def tool(name: str) -> dict:
    return {"name": name, "description": "d", "input_schema": {"type": "object"}}


@pytest.mark.django_db
def test_calls_without_usage_show_the_local_estimate_and_say_there_was_none(operator_client):
    session = session_new()
    message_store(session, "user", [{"type": "text", "text": "hello " * 50}])
    head = {"model": session.model, "max_tokens": 10, "system": [{"type": "text", "text": "S"}]}
    call_new(session, {**head, "messages": []}, error="overloaded")
    second = call_new(session, {**head, "messages": [{"$messages": [0, 0]}]}, estimated_prompt_tokens=0)
    found = break_of(second)
    assert found is not None and found.reason == "" and found.tokens_after > 50  # unscaled estimate
    summary = summary_of(inspector(operator_client, second))
    assert "No usage recorded for this call." in summary


@pytest.mark.django_db
def test_tokens_after_are_scaled_to_the_providers_count():
    session = session_new()
    message_store(session, "user", [{"type": "text", "text": "word " * 400}])
    head = {"model": session.model, "max_tokens": 10, "system": [{"type": "text", "text": "old"}]}
    call_new(session, {**head, "messages": [{"$messages": [0, 0]}]})
    changed = {**head, "system": [{"type": "text", "text": "new"}], "messages": [{"$messages": [0, 0]}]}
    call = call_new(session, changed, estimated_prompt_tokens=1000, cache_creation_input_tokens=1500)
    found = break_of(call)
    assert found is not None and (found.where, found.reason) == ("system", "system")
    # The whole request after the break (the 400 words and "new"), in the provider's tokens:
    # about 1.5 times the local estimate, never more than the provider counted.
    assert 400 * 1.4 < found.tokens_after <= 1500


@pytest.mark.django_db
def test_tool_names_and_quoted_texts_are_escaped(operator_client):
    session = session_new()
    evil = '<img src=x onerror="window.pwned=1">'
    head = {"model": session.model, "max_tokens": 10}
    call_new(session, {**head, "tools": [tool("a")], "messages": []})
    call = call_new(session, {**head, "tools": [tool("a"), tool(evil)], "messages": []})
    found = break_of(call)
    assert found is not None and found.detail == f"added {evil}"
    assert (found.where, found.index) == ("tools", 1)
    html = inspector(operator_client, call)
    assert evil not in html and "added &lt;img src=x onerror=&quot;window.pwned=1&quot;&gt;" in html
    assert html.count('data-break="tools"') == 1


@pytest.mark.django_db
def test_a_previous_tool_list_no_longer_stored_breaks_at_the_tools():
    session = session_new()
    head = {"model": session.model, "max_tokens": 10}
    call_new(session, {**head, "tools": {"$part": "0" * 64}, "messages": []})
    RequestPart.objects.create(sha256="1" * 64, text='[{"name": "a"}]')
    call = call_new(session, {**head, "tools": {"$part": "1" * 64}, "messages": []})
    found = break_of(call)
    assert found is not None and (found.where, found.reason) == ("tools", "tools")
    assert found.detail == "the previous request's tool list is not stored"


@pytest.mark.django_db
def test_a_masked_result_is_masking_and_an_unknown_change_is_history():
    session = session_new()
    use = {"type": "tool_use", "id": "t1", "name": "a", "input": {}}
    message_store(session, "assistant", [use])
    message_store(session, "user", [{"type": "tool_result", "tool_use_id": "t1", "content": "x" * 900}])
    head = {"model": session.model, "max_tokens": 10}
    call_new(session, {**head, "messages": [{"$messages": [0, 1]}]})
    masked = {"type": "tool_result", "tool_use_id": "t1", "content": "[masked]"}
    placeholder = {"role": "user", "content": [masked]}
    call = call_new(session, {**head, "messages": [{"$messages": [0, 0]}, placeholder]})
    found = break_of(call)
    assert found is not None and (found.reason, found.index, found.block) == ("history", 1, 0)
    MaskedResult.objects.create(
        session=session, epoch=0, tool_use_id="t1", size_chars=900, placeholder="[masked]"
    )
    found = break_of(call)
    assert found is not None and (found.reason, found.detail) == ("masking", "tool result t1 masked")


@pytest.mark.django_db
def test_the_scripted_providers_calls_are_compared_like_any_other(operator_client):
    session = session_new(model="scripted")
    head = {"model": "scripted", "max_tokens": 10, "system": [{"type": "text", "text": "S"}]}
    call_new(session, {**head, "messages": []}, provider="scripted")
    call = call_new(session, {**head, "messages": []}, provider="scripted", input_tokens=5)
    found = break_of(call)
    assert found is not None and (found.reason, found.tokens_after) == ("", 0)
    assert "extends the previous one" in summary_of(inspector(operator_client, call))
