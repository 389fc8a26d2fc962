"""The session page's panels: context gauge, observations, archive stepper, prompt inspector."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.utils import timezone
from django.utils.html import escape

from memory_app.notepad import services as memory_services
from memory_app.notepad.models import NotepadRevision
from memory_app.notepad.prompts import NOTEPAD_GUIDANCE
from memory_app.observations.content import result_parts
from memory_app.observations.models import Observation
from memory_app.observations.services import MASKED_LIFETIME, observation_create, observations_gc
from memory_app.scratchpad import services as scratchpad_services
from memory_app.tasks.models import Task, TaskStatus
from sessions_app import selectors as session_selectors
from sessions_app.common.estimate import estimate_text_tokens
from sessions_app.dashboard import selectors
from sessions_app.dashboard.selectors.gauge import apportion
from sessions_app.engine.context import build_request
from sessions_app.engine.features import features
from sessions_app.engine.history import history_for, history_forget
from sessions_app.models import AgentSession, Archive, ModelCall, Turn
from tests.dashboard.conftest import chat, message_store, session_new

LOG = "".join(f"INFO line {i}\n" for i in range(1, 501)) + "ERROR boom\n" + "INFO after\n"


def observation_of(session, content: str = LOG):
    turn = Turn.objects.create(session=session)
    return observation_create(
        session_id=session.pk,
        turn_id=turn.pk,
        step=1,
        tool_name="fs_read",
        tool_use_id="toolu_obs",
        parts=result_parts({"path": "big.log", "content": content}),
        ttl_seconds=3600,
    )


# ---------------------------------------------------------------------------
# Context gauge
# ---------------------------------------------------------------------------
@pytest.mark.django_db
def test_gauge_splits_the_estimate_into_its_sections():
    session = session_new(system_prompt="You are careful. " * 20)
    message_store(session, "user", [{"type": "text", "text": "hello " * 50}])
    scratchpad_services.scratchpad_apply(
        session_id=session.pk,
        action="set_notes",
        args={"content": "agent notes"},
        author="agent",
        limits=scratchpad_services.ScratchpadLimits.from_settings(session.settings),
    )
    AgentSession.objects.filter(pk=session.pk).update(
        last_prompt_tokens=None, last_estimated_tokens=None, token_ratio=1.0
    )
    gauge = selectors.context_gauge(session=AgentSession.objects.get(pk=session.pk))
    parts = {p.key: p.tokens for p in gauge.parts}
    assert list(parts) == ["system", "notepad", "scratchpad", "history", "tools"]
    assert all(parts[k] > 0 for k in ("system", "notepad", "scratchpad", "history", "tools"))
    assert sum(parts.values()) == gauge.estimated_tokens


@pytest.mark.django_db
def test_gauge_system_row_counts_every_features_guidance():
    session = session_new(system_prompt="")
    AgentSession.objects.filter(pk=session.pk).update(token_ratio=1.0)
    gauge = selectors.context_gauge(session=AgentSession.objects.get(pk=session.pk))
    parts = {p.key: p.tokens for p in gauge.parts}
    snapshot = features().snapshot(session)
    guidance = "\n\n".join(
        text for section in features().sections for text in section.static_system(snapshot)
    )
    assert guidance  # the default features give guidance
    assert parts["system"] == estimate_text_tokens(guidance)
    # The memory rows hold what the memory shows, not its guidance.
    assert parts["notepad"] < estimate_text_tokens(NOTEPAD_GUIDANCE)


@pytest.mark.django_db(transaction=True)
def test_gauge_sections_sum_to_the_estimate_of_the_request_the_engine_builds():
    session = session_new(system_prompt="Be brief.")
    chat(session.pk, "remember: the build is green")
    chat(session.pk, "count words: one two three")
    AgentSession.objects.filter(pk=session.pk).update(
        last_prompt_tokens=None, last_estimated_tokens=None, token_ratio=1.0
    )
    session = AgentSession.objects.get(pk=session.pk)
    snapshot = features().snapshot(session)
    history_forget(session.pk)
    built = build_request(
        session=snapshot,
        history=history_for(session.pk, session.epoch, feature_set=features()),
        server_tools=features().tools_for_session(snapshot),
        sections=features().sections,
        max_tokens=1,
    )
    gauge = selectors.context_gauge(session=session)
    assert gauge.estimated_tokens == built.estimated_tokens
    assert sum(p.tokens for p in gauge.parts) == built.estimated_tokens


@pytest.mark.parametrize(
    ("total", "weights", "expected"),
    [
        (10, {"a": 1, "b": 1, "c": 1}, {"a": 4, "b": 3, "c": 3}),
        (7, {"a": 0, "b": 5}, {"a": 0, "b": 7}),
        (0, {"a": 3, "b": 2}, {"a": 0, "b": 0}),
        (5, {"a": 0, "b": 0}, {"a": 0, "b": 0}),
    ],
)
def test_apportion_splits_a_total_in_whole_tokens(total, weights, expected):
    assert apportion(total, weights) == expected


@pytest.mark.django_db
def test_gauge_threshold_is_window_times_compact_threshold():
    session = session_new(context_window=10_000, compact_threshold=0.5)
    gauge = selectors.context_gauge(session=session)
    assert (gauge.window, gauge.threshold_tokens, gauge.threshold_percent) == (10_000, 5000, 50.0)


@pytest.mark.django_db
def test_notepad_part_grows_when_the_notepad_is_written():
    session = session_new()
    before = {p.key: p.tokens for p in selectors.context_gauge(session=session).parts}
    memory_services.notepad_write(session_id=session.pk, content="finding " * 200, author="agent")
    after = {p.key: p.tokens for p in selectors.context_gauge(session=session).parts}
    assert after["notepad"] >= before["notepad"] + 150
    assert after["history"] == before["history"]


@pytest.mark.django_db
def test_history_that_finished_tasks_keep_out_of_requests_is_shown_apart(operator_client):
    session = session_new()
    message_store(session, "user", [{"type": "text", "text": "words " * 400}])
    AgentSession.objects.filter(pk=session.pk).update(
        last_prompt_tokens=None, last_estimated_tokens=None, token_ratio=1.0
    )
    session = AgentSession.objects.get(pk=session.pk)
    before = {p.key: p.tokens for p in selectors.context_gauge(session=session).parts}
    Task.objects.create(
        session=session,
        name="dig",
        status=TaskStatus.ENDED,
        begin_epoch=0,
        begin_position=0,
        begin_tool_use_id="toolu_begin",
        end_epoch=0,
        tokens_saved=100,
    )
    gauge = selectors.context_gauge(session=session)
    assert [(s.label, s.tokens) for s in gauge.saved] == [("Collapsed by finished tasks (not sent)", 100)]
    assert {p.key: p.tokens for p in gauge.parts}["history"] == before["history"] - 100
    html = operator_client.get(f"/sessions/{session.pk}/context/").content.decode()
    assert re.search(r'data-part="collapsed".*Collapsed by finished tasks \(not sent\).*−100', html)


@pytest.mark.django_db
def test_switched_off_memory_contributes_nothing():
    session = session_new(settings={"notepad": {"enabled": False}, "scratchpad": {"enabled": False}})
    parts = {p.key: p.tokens for p in selectors.context_gauge(session=session).parts}
    assert parts["notepad"] == parts["scratchpad"] == 0


@pytest.mark.django_db
def test_gauge_is_calibrated_by_the_providers_last_count():
    session = session_new()
    local = selectors.context_gauge(session=session).estimated_tokens
    AgentSession.objects.filter(pk=session.pk).update(
        last_prompt_tokens=2 * local, last_estimated_tokens=local, token_ratio=2.0
    )
    gauge = selectors.context_gauge(session=AgentSession.objects.get(pk=session.pk))
    assert gauge.estimated_tokens == 2 * local
    assert sum(p.tokens for p in gauge.parts) == 2 * local


@pytest.mark.django_db
def test_gauge_over_the_threshold_says_so(operator_client):
    session = session_new(context_window=1000, compact_threshold=0.1)
    html = operator_client.get(f"/sessions/{session.pk}/context/").content.decode()
    assert "over the compaction threshold" in html and 'class="seg seg-tools"' in html


# ---------------------------------------------------------------------------
# Observations
# ---------------------------------------------------------------------------
@pytest.mark.django_db
def test_observation_list_shows_the_sessions_observations(operator_client):
    session = session_new()
    observation = observation_of(session)
    html = operator_client.get(f"/sessions/{session.pk}/observations/").content.decode()
    assert observation.pk in html and "fs_read" in html and ">502<" in html  # lines


@pytest.mark.django_db
def test_a_masked_result_kept_with_its_session_never_expires_in_the_list(operator_client):
    session = session_new()
    observation = observation_of(session)
    Observation.objects.filter(pk=observation.pk).update(
        session_scope=True, expires_at=timezone.now() + MASKED_LIFETIME
    )
    html = operator_client.get(f"/sessions/{session.pk}/observations/").content.decode()
    assert ">never</span>" in html
    assert "years" not in html


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("query", "shown", "hidden"),
    [
        ("mode=head&n=24", "INFO line 1\nINFO line 2\n", "INFO line 3"),
        ("mode=tail&n=11", "INFO after\n", "ERROR boom"),
        ("mode=range&start=12&end=24", "INFO line 2\n", "INFO line 1\n"),
        ("mode=lines&start_line=501&end_line=501", "ERROR boom", "INFO line 500"),
        (
            "mode=grep&pattern=ERR.R&context=1",
            "500-INFO line 500\n501:ERROR boom\n502-INFO after",
            "line 499",
        ),
    ],
)
def test_observation_viewer_reads_like_the_model(operator_client, query, shown, hidden):
    session = session_new()
    observation = observation_of(session)
    html = operator_client.get(
        f"/sessions/{session.pk}/observations/{observation.pk}/?{query}"
    ).content.decode()
    content = html.split('<pre class="obs-content">', 1)[1].split("</pre>", 1)[0]
    assert escape(shown) in content and escape(hidden) not in content


@pytest.mark.django_db
def test_observation_viewer_shows_a_bad_read_as_an_error(operator_client):
    session = session_new()
    observation = observation_of(session)
    html = operator_client.get(
        f"/sessions/{session.pk}/observations/{observation.pk}/?mode=grep&pattern=(unclosed"
    ).content.decode()
    assert "pattern is not a valid regular expression" in html


@pytest.mark.django_db
def test_observation_viewer_says_an_expired_observations_content_was_dropped(operator_client):
    session = session_new()
    observation = observation_of(session)
    type(observation).objects.filter(pk=observation.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    observations_gc()
    html = operator_client.get(
        f"/sessions/{session.pk}/observations/{observation.pk}/?mode=head"
    ).content.decode()
    assert "its content was dropped" in html
    assert 'class="obs-content"' not in html


@pytest.mark.django_db
def test_another_sessions_observation_is_404(operator_client):
    mine, theirs = session_new(), session_new()
    observation = observation_of(theirs)
    assert operator_client.get(f"/sessions/{mine.pk}/observations/{observation.pk}/").status_code == 404


@pytest.mark.django_db
def test_observation_content_is_escaped(operator_client):
    session = session_new()
    observation = observation_of(session, content="<script>alert(1)</script>\n" * 300)
    html = operator_client.get(f"/sessions/{session.pk}/observations/{observation.pk}/").content.decode()
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


# ---------------------------------------------------------------------------
# The archive stepper
# ---------------------------------------------------------------------------
def compacted_session():
    """Three epochs: two archives, each with its messages, and the notepad changing between."""
    session = session_new()
    start = timezone.now() - timedelta(hours=1)
    previous = None
    for epoch in range(2):
        message_store(session, "user", [{"type": "text", "text": f"question of epoch {epoch}"}], epoch=epoch)
        NotepadRevision.objects.create(
            session=session,
            version=epoch + 1,
            author="agent",
            operation="write",
            content=f"notes of epoch {epoch}",
            created_at=start + timedelta(minutes=10 * epoch),
        )
        previous = Archive.objects.create(
            session=session,
            epoch=epoch,
            summary=f"**Summary** of epoch {epoch}",
            message_count=1,
            tokens_before=1000,
            tokens_after=100,
            previous=previous,
            created_at=start + timedelta(minutes=10 * epoch + 5),
        )
    AgentSession.objects.filter(pk=session.pk).update(epoch=2, notepad="notes of epoch 1", notepad_version=2)
    return session


@pytest.mark.django_db
def test_stepper_opens_on_the_latest_compaction(operator_client):
    session = compacted_session()
    html = operator_client.get(f"/sessions/{session.pk}/archives/").content.decode()
    assert "Compaction 2 of 2 · epoch 1" in html
    assert "<strong>Summary</strong> of epoch 1" in html
    assert "question of epoch 1" in html and "question of epoch 0" not in html


@pytest.mark.django_db
def test_stepper_goes_to_the_previous_compaction_and_back(operator_client):
    session = compacted_session()
    first = operator_client.get(f"/sessions/{session.pk}/archives/?epoch=0").content.decode()
    assert "Compaction 1 of 2 · epoch 0" in first and "question of epoch 0" in first
    assert f'hx-get="/sessions/{session.pk}/archives/?epoch=1"' in first  # next
    assert 'data-archive-step="previous"\n      disabled' in first


@pytest.mark.django_db
def test_stepper_shows_the_notepad_as_it_was_when_the_archive_was_made(operator_client):
    session = compacted_session()
    memory_services.notepad_write(session_id=session.pk, content="notes of today", author="agent")
    html = operator_client.get(f"/sessions/{session.pk}/archives/?epoch=0").content.decode()
    notepad = html.split('id="archive-notepad"', 1)[1].split("</div>", 1)[0]
    assert "notes of epoch 0" in notepad


@pytest.mark.django_db
def test_archived_messages_come_a_page_at_a_time(operator_client):
    session = compacted_session()
    for index in range(selectors.ARCHIVE_MESSAGES_PAGE_SIZE + 3):
        message_store(session, "assistant", [{"type": "text", "text": f"archived reply {index}."}], epoch=0)
    first = operator_client.get(f"/sessions/{session.pk}/archives/?epoch=0").content.decode()
    assert "archived reply 48." in first and "archived reply 49." not in first
    more = first.split('class="secondary load-more" hx-get="', 1)[1].split('"', 1)[0]
    rest = operator_client.get(more.replace("&amp;", "&")).content.decode()
    assert "archived reply 49." in rest and "archived reply 52." in rest and "load-more" not in rest


@pytest.mark.django_db
def test_unknown_epoch_is_404_and_no_compaction_says_so(operator_client):
    session = session_new()
    assert operator_client.get(f"/sessions/{session.pk}/archives/?epoch=4").status_code == 404
    assert "No compaction yet" in operator_client.get(f"/sessions/{session.pk}/archives/").content.decode()


# ---------------------------------------------------------------------------
# The prompt inspector
# ---------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_inspector_shows_the_exact_last_request_with_its_breakpoints(operator_client):
    session = session_new(system_prompt="You are the <b>auditor</b>.")
    chat(session.pk, "first")
    chat(session.pk, "second")
    call = ModelCall.objects.filter(session=session).latest("started_at")
    inspected = selectors.request_inspect(call=call)
    assert inspected.verified and inspected.body == session_selectors.model_call_request(call=call)
    assert inspected.breakpoints == 2  # end of the stable system prompt, last stored message
    assert inspected.stable_prefix_ratio == call.stable_prefix_bytes / call.request_bytes > 0.5
    html = operator_client.get(f"/sessions/{session.pk}/inspector/").content.decode()
    assert f"Request #{call.pk} · turn step 1" in html
    assert html.count("⚑ cache breakpoint") == 2
    assert "You are the &lt;b&gt;auditor&lt;/b&gt;." in html
    assert f'<span class="value mono">{call.input_tokens}</span>' in html
    # The tile is the share of the prompt before where it parts from the previous request (the
    # canonical JSON's bytes start with max_tokens, which a small window changes every call).
    assert inspected.prefix_break is not None and inspected.prefix_kept_ratio is not None
    assert 0.5 < inspected.prefix_kept_ratio < 1
    assert f'id="prefix-kept">{100 * inspected.prefix_kept_ratio:.1f}%' in html
    assert "✓ rebuilt exactly" in html


@pytest.mark.django_db(transaction=True)
def test_inspector_steps_to_an_earlier_request(operator_client):
    session = session_new()
    chat(session.pk, "first")
    chat(session.pk, "second")
    first, second = ModelCall.objects.filter(session=session).order_by("started_at")
    latest = operator_client.get(f"/sessions/{session.pk}/inspector/").content.decode()
    assert f"Request #{second.pk} ·" in latest and "data-follow" in latest
    assert f'hx-get="/sessions/{session.pk}/inspector/?call={first.pk}"' in latest
    earlier = operator_client.get(f"/sessions/{session.pk}/inspector/?call={first.pk}").content.decode()
    assert f"Request #{first.pk} ·" in earlier and "data-follow" not in earlier
    assert f'hx-get="/sessions/{session.pk}/inspector/?call={second.pk}"' in earlier


@pytest.mark.django_db(transaction=True)
def test_request_json_is_the_exact_body_sent(operator_client):
    session = session_new()
    chat(session.pk, "hello")
    call = ModelCall.objects.get(session=session)
    body = json.loads(
        operator_client.get(f"/sessions/{session.pk}/model-calls/{call.pk}/request.json").content
    )
    assert body == session_selectors.model_call_request(call=call)


@pytest.mark.django_db
def test_another_sessions_model_call_is_404(operator_client):
    mine, theirs = session_new(), session_new()
    call = ModelCall.objects.create(
        session=theirs, provider="scripted", model="m", request={}, request_sha256=""
    )
    assert operator_client.get(f"/sessions/{mine.pk}/inspector/?call={call.pk}").status_code == 404
    assert operator_client.get(f"/sessions/{mine.pk}/model-calls/{call.pk}/request.json").status_code == 404


@pytest.mark.django_db
def test_inspector_without_a_call_says_so(operator_client):
    session = session_new()
    assert "No model call yet" in operator_client.get(f"/sessions/{session.pk}/inspector/").content.decode()


@pytest.mark.django_db(transaction=True)
def test_the_prefix_kept_tile_is_not_fooled_by_max_tokens_in_a_small_window(operator_client):
    # In a small window each call's max_tokens is lowered to fit, and the canonical JSON starts
    # with it: its bytes part at once, while the prompt itself extends the previous one.
    session = session_new(context_window=6000)
    chat(session.pk, "first")
    chat(session.pk, "second")
    calls = list(ModelCall.objects.filter(session=session).order_by("started_at"))
    inspected = selectors.request_inspect(call=calls[-1])
    assert inspected.body["max_tokens"] != selectors.request_inspect(call=calls[-2]).body["max_tokens"]
    assert inspected.stable_prefix_ratio < 0.01
    assert inspected.prefix_kept_ratio is not None and inspected.prefix_kept_ratio > 0.5
