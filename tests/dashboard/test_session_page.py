"""The session page: the transcript as stored, its pages, and what untrusted text may not do."""

from __future__ import annotations

import re
import uuid

import pytest
from django.db.models import F

from memory_app.notepad import services as memory_services
from sessions_app import services
from sessions_app.dashboard.selectors import TRANSCRIPT_PAGE_SIZE
from sessions_app.engine.prompts import PRE_COMPACTION_WARNING
from sessions_app.models import AgentSession, Archive, Message, SessionEvent, ToolCall, Turn
from tests.dashboard.conftest import message_store, session_new

pytestmark = pytest.mark.django_db

SCRIPT = "<script>alert('x')</script>"


def text(value: str) -> dict:
    return {"type": "text", "text": value}


def page_of(client, session) -> str:
    response = client.get(f"/sessions/{session.pk}/")
    assert response.status_code == 200
    return response.content.decode()


def transcript_of(html: str) -> str:
    return html.split('id="transcript-items"', 1)[1].split('id="streaming"', 1)[0]


def test_unknown_session_is_404(operator_client):
    assert operator_client.get(f"/sessions/{uuid.uuid4()}/").status_code == 404


def test_user_and_assistant_messages_are_shown_in_order(operator_client):
    session = session_new()
    message_store(session, "user", [text("What is the total?")])
    message_store(session, "assistant", [text("It is **42**.")])
    html = transcript_of(page_of(operator_client, session))
    assert html.index("What is the total?") < html.index("<strong>42</strong>")


def test_tool_calls_and_results_are_collapsed_with_the_tool_name(operator_client):
    session = session_new()
    turn = Turn.objects.create(session=session)
    ToolCall.objects.create(
        session=session, turn=turn, tool_use_id="toolu_1", name="count_words", executor="server"
    )
    message_store(
        session,
        "assistant",
        [
            text("Counting."),
            {"type": "tool_use", "id": "toolu_1", "name": "count_words", "input": {"t": "a b"}},
        ],
    )
    message_store(session, "user", [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "2 words"}])
    html = transcript_of(page_of(operator_client, session))
    assert re.search(r'<details class="tool-call">\s*<summary>.*count_words', html, re.S)
    assert re.search(r'<details class="tool-result" data-key="m1-0">.*count_words.*2 words', html, re.S)


def test_failed_tool_result_is_marked_as_an_error(operator_client):
    session = session_new()
    message_store(
        session, "user", [{"type": "tool_result", "tool_use_id": "t", "content": "boom", "is_error": True}]
    )
    assert 'class="tool-result is-error"' in page_of(operator_client, session)


def test_compaction_marker_sits_where_the_epoch_begins_with_the_archive_summary(operator_client):
    session = session_new()
    message_store(session, "user", [text("old question")])
    archive = Archive.objects.create(
        session=session,
        epoch=0,
        summary="The user asked an old question.",
        message_count=1,
        tokens_before=900,
        tokens_after=100,
    )
    message_store(
        session,
        "user",
        [text("[Summary …]")],
        metadata={"type": "compact", "previous_archive": str(archive.pk)},
        epoch=1,
    )
    message_store(session, "user", [text("new question")], epoch=1)
    html = transcript_of(page_of(operator_client, session))
    marker = html.index('class="marker compaction"')
    assert html.index("old question") < marker < html.index("new question")
    assert "The user asked an old question." in html and "epoch 0 archived, epoch 1 begins" in html


def test_pre_compaction_warning_is_a_marker_with_the_seed_text(operator_client):
    session = session_new()
    message_store(session, "user", [text(PRE_COMPACTION_WARNING)], metadata={"type": "compaction_warning"})
    html = transcript_of(page_of(operator_client, session))
    assert 'class="marker warning"' in html and 'class="msg user"' not in html


def test_script_in_a_user_message_is_shown_as_text(operator_client):
    session = session_new()
    message_store(session, "user", [text(SCRIPT)])
    html = transcript_of(page_of(operator_client, session))
    assert "<script>" not in html and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html


def test_markdown_from_the_model_is_sanitized(operator_client):
    session = session_new()
    hostile = (
        f"**ok** {SCRIPT} <img src=x onerror=alert(1)> [link](javascript:alert(1)) <b onclick=alert(1)>b</b>"
    )
    message_store(session, "assistant", [text(hostile)])
    html = transcript_of(page_of(operator_client, session))
    assert "<strong>ok</strong>" in html
    assert (
        "<script" not in html
        and "onerror" not in html
        and "javascript:" not in html
        and "onclick" not in html
    )


def test_notepad_preview_is_sanitized_markdown(operator_client):
    session = session_new()
    memory_services.notepad_write(
        session_id=session.pk, content=f"# Plan\n{SCRIPT}\n- [x] done", author="agent"
    )
    html = page_of(operator_client, session)
    preview = html.split('id="notepad-view"', 1)[1].split('id="notepad-revisions"', 1)[0]
    assert "<h1>Plan</h1>" in preview and "<script" not in preview


def test_page_shows_the_latest_messages_and_a_loader_for_older_ones(operator_client):
    session = session_new()
    for index in range(TRANSCRIPT_PAGE_SIZE + 5):
        message_store(session, "user", [text(f"message number {index}.")])
    html = page_of(operator_client, session)
    assert "message number 5." in html and "message number 4." not in html
    assert f'hx-get="/sessions/{session.pk}/transcript/?before=5"' in html


def test_older_page_holds_the_messages_before_the_loader(operator_client):
    session = session_new()
    for index in range(TRANSCRIPT_PAGE_SIZE + 5):
        message_store(session, "user", [text(f"message number {index}.")])
    html = operator_client.get(f"/sessions/{session.pk}/transcript/?before=5").content.decode()
    assert [f"message number {i}." in html for i in range(6)] == [True] * 5 + [False]
    assert "older-loader" not in html  # the session's first message is on this page


def test_older_page_needs_a_position(operator_client):
    session = session_new()
    assert operator_client.get(f"/sessions/{session.pk}/transcript/?before=x").status_code == 404


def test_a_running_steps_streamed_text_is_shown_when_the_page_loads(operator_client):
    session = session_new()
    services.turn_begin(session_id=session.pk, content="hello")
    for part in ("Hel", "lo <wor", "ld>"):
        services.event_emit(session_id=session.pk, type="assistant.delta", payload={"text": part})
    html = page_of(operator_client, session)
    assert '<div id="streaming-text" class="body plain">Hello &lt;world&gt;</div>' in html


def test_streamed_text_of_a_finished_step_is_not_shown_again(operator_client):
    session = session_new()
    services.turn_begin(session_id=session.pk, content="hello")
    services.event_emit(session_id=session.pk, type="assistant.delta", payload={"text": "Hi"})
    services.event_emit(session_id=session.pk, type="assistant.message", payload={"content": [text("Hi")]})
    assert '<div id="streaming-text" class="body plain"></div>' in page_of(operator_client, session)


def test_page_connects_its_websocket_from_the_last_event_it_shows(operator_client):
    session = session_new()
    services.event_emit(session_id=session.pk, type="notepad.updated", payload={})
    html = page_of(operator_client, session)
    assert f'ws-connect="/ws/dashboard/sessions/{session.pk}/?since_seq=1"' in html


def test_tab_and_archive_in_the_address_are_restored(operator_client):
    session = session_new()
    html = operator_client.get(f"/sessions/{session.pk}/?tab=archives&epoch=3").content.decode()
    assert 'data-tab="archives"' in html
    assert f'hx-get="/sessions/{session.pk}/archives/?epoch=3"' in html


def test_ten_thousand_message_session_renders_one_page_in_bounded_queries(
    operator_client, django_assert_max_num_queries
):
    session = session_new()
    Message.objects.bulk_create(
        Message(
            session=session,
            position=i,
            role="user" if i % 2 == 0 else "assistant",
            content=[text(f"message {i} " + "lorem ipsum " * 20)],
            token_estimate=60,
        )
        for i in range(10_000)
    )
    AgentSession.objects.filter(pk=session.pk).update(next_position=F("next_position") + 10_000)
    SessionEvent.objects.bulk_create(
        SessionEvent(session=session, seq=i + 1, type="assistant.delta", payload={"text": "x"})
        for i in range(500)
    )
    with django_assert_max_num_queries(20):
        response = operator_client.get(f"/sessions/{session.pk}/")
    html = response.content.decode()
    assert html.count('class="msg ') == TRANSCRIPT_PAGE_SIZE + 1  # the page, and the streaming bubble
    assert "message 9999 " in html and "message 9939 " not in html
    assert response.context["gauge"].parts[3].key == "history"
    assert response.context["gauge"].parts[3].tokens > 0


@pytest.mark.parametrize("path", ["/", "/sessions/{id}/", "/sessions/{id}/status/"])
def test_pages_answer_head_as_they_answer_get(operator_client, path):
    session = session_new()
    response = operator_client.head(path.format(id=session.pk))
    assert response.status_code == 200
    assert response.content == b""


def test_the_prompt_tab_opens_the_prompt_inspector(operator_client):
    session = session_new()
    html = operator_client.get(f"/sessions/{session.pk}/?tab=prompt").content.decode()
    assert 'data-tab="inspector"' in html
    assert "tab-notice" not in html


def test_an_unknown_tab_opens_the_default_and_says_so(operator_client):
    session = session_new()
    html = operator_client.get(f"/sessions/{session.pk}/?tab=nonsense<b>").content.decode()
    assert 'data-tab="context"' in html
    assert "There is no tab “nonsense&lt;b&gt;”: showing Context." in html


def test_the_head_names_the_provider_and_says_when_the_scripted_model_answers(operator_client):
    session = session_new()
    html = page_of(operator_client, session)
    assert 'data-provider="scripted"' in html and "scripted model, offline" in html
