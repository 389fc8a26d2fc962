"""Chunked storage of observations and the slices read back from it (services and selectors).

Small chunk sizes put every boundary case within a few characters. Marked `services` too, so
the PostgreSQL pass checks the same storage on bytea and text columns.
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from memory_app.observations.content import ResultParts, result_parts
from memory_app.observations.grep import GREP_LINE_MAX_CHARS, observation_grep
from memory_app.observations.models import Observation, ObservationChunk, ObservationKind
from memory_app.observations.references import observation_parts
from memory_app.observations.selectors import (
    ObservationReadError,
    observation_get_for_read,
    observation_read_lines,
    observation_slice,
    observations_in_scope,
    observations_in_scope_exist,
)
from memory_app.observations.services import observation_create, observation_id_for, observations_gc
from sessions_app.common.estimate import estimate_text_tokens
from sessions_app.models import AgentSession, Turn

pytestmark = [pytest.mark.django_db, pytest.mark.services]

TEXT = "héllo\nwörld\n\nthe end, no newline"


@pytest.fixture
def turn() -> Turn:
    session = AgentSession.objects.create(model="scripted", context_window=100_000)
    return Turn.objects.create(session=session)


def store(
    turn: Turn, content: str | bytes, *, chunk_size: int = 4, ttl: int = 3600, **extra: Any
) -> Observation:
    parts = (
        ResultParts(ObservationKind.BINARY, data=content)
        if isinstance(content, bytes)
        else ResultParts(ObservationKind.TEXT, text=content)
    )
    return observation_create(
        session_id=turn.session_id,
        turn_id=turn.id,
        step=1,
        tool_name="fs_read",
        tool_use_id="toolu_1",
        parts=parts,
        ttl_seconds=ttl,
        chunk_size=chunk_size,
        **extra,
    )


def test_id_is_16_hexadecimal_characters(turn: Turn) -> None:
    assert len(store(turn, TEXT).id) == 16
    assert int(store(turn, TEXT).id, 16) >= 0


def test_id_is_the_same_for_the_same_result_and_its_tokens_do_not_vary(turn: Turn) -> None:
    # Issue 32: random ids made the prompt, and the service's own estimates, differ run to run.
    first, second = store(turn, TEXT), store(turn, TEXT)
    assert first.id == observation_id_for(session_id=turn.session_id, tool_use_id="toolu_1")
    assert second.id == observation_id_for(session_id=turn.session_id, tool_use_id="toolu_1", attempt=1)
    assert first.id != second.id
    # Decimal digits: cl100k counts 16 of them as the same number of tokens whatever they are.
    ids = [observation_id_for(session_id=uuid.uuid4(), tool_use_id=f"t{n}") for n in range(50)]
    assert all(i.isdigit() and len(i) == 16 for i in ids)
    assert len({estimate_text_tokens(i) for i in ids}) == 1
    other = AgentSession.objects.create(model="scripted", context_window=100_000)
    assert observation_id_for(session_id=other.id, tool_use_id="toolu_1") != first.id


def test_text_sizes_hash_and_lines(turn: Turn) -> None:
    observation = store(turn, TEXT)
    encoded = TEXT.encode()
    assert (observation.size_bytes, observation.char_count, observation.line_count) == (
        len(encoded),
        len(TEXT),
        4,
    )
    assert observation.sha256 == hashlib.sha256(encoded).hexdigest()


def test_text_is_split_into_chunks_with_offsets_and_lines(turn: Turn) -> None:
    observation = store(turn, "ab\ncd\n\nef", chunk_size=3)
    rows = list(
        ObservationChunk.objects.filter(observation=observation).values_list(
            "text", "start_char", "start_byte", "start_line", "end_line"
        )
    )
    assert rows == [("ab\n", 0, 0, 1, 1), ("cd\n", 3, 3, 2, 2), ("\nef", 6, 6, 3, 4)]


def test_every_slice_equals_the_python_slice(turn: Turn) -> None:
    observation = store(turn, TEXT)
    for start in range(len(TEXT) + 1):
        for end in range(start, len(TEXT) + 2):
            assert observation_slice(observation=observation, start=start, end=end) == TEXT[start:end]


def test_every_binary_slice_equals_the_python_slice(turn: Turn) -> None:
    data = bytes(range(23))
    observation = store(turn, data, chunk_size=5)
    assert observation.summary == f"[BINARY: 23 bytes, sha256={hashlib.sha256(data).hexdigest()}]"
    for start in range(24):
        for end in range(start, 25):
            assert observation_slice(observation=observation, start=start, end=end) == data[start:end]


def test_a_slice_is_one_query_whatever_the_size(turn: Turn, django_assert_num_queries: Any) -> None:
    observation = store(turn, "x" * 10_000, chunk_size=10)
    with django_assert_num_queries(1):
        assert observation_slice(observation=observation, start=5_005, end=5_025) == "x" * 20


def test_every_line_range_equals_the_python_lines(turn: Turn) -> None:
    text = "one\ntwo\n\nfour is longer\nfive\nsix"
    lines = text.splitlines(keepends=True)
    observation = store(turn, text, chunk_size=3)
    for first in range(1, len(lines) + 1):
        for last in range(first, len(lines) + 2):
            result = observation_read_lines(observation=observation, start_line=first, end_line=last)
            assert result["content"] == "".join(lines[first - 1 : last]), (first, last)


def test_lines_of_a_text_ending_with_a_newline(turn: Turn) -> None:
    observation = store(turn, "a\nb\n", chunk_size=2)
    assert observation.line_count == 2
    assert observation_read_lines(observation=observation, start_line=2, end_line=9)["content"] == "b\n"


def test_lines_stop_at_the_read_limit(turn: Turn, settings: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr("memory_app.observations.selectors.READ_MAX_CHARS", 10)
    observation = store(turn, "1234\n5678\nabcd\n", chunk_size=4)
    result = observation_read_lines(observation=observation, start_line=1, end_line=3)
    assert (result["content"], result["end_line"]) == ("1234\n5678\n", 2)
    assert result["truncated"].startswith("stopped before line 3")


def test_grep_across_chunk_boundaries(turn: Turn) -> None:
    observation = store(turn, "alpha\nbeta\ngamma\ndelta\n", chunk_size=4)
    result = observation_grep(observation=observation, pattern="^(beta|delta)$")
    assert result["content"] == "2:beta\n4:delta"


def test_grep_searches_and_shows_a_long_line_up_to_the_cap(turn: Turn) -> None:
    line = "x" * (GREP_LINE_MAX_CHARS - 1) + "NEEDLE" + "y" * 10_000
    observation = store(turn, "short\n" + line + "\n", chunk_size=1000)
    assert observation_grep(observation=observation, pattern="NEEDLE")["matches"] == 0
    result = observation_grep(observation=observation, pattern="^x+N$")
    assert result["content"] == "2:" + "x" * (GREP_LINE_MAX_CHARS - 1) + "N…"


def test_full_content_for_references(turn: Turn) -> None:
    observation = store(turn, TEXT)
    assert observation_parts(observation=observation).text == TEXT


def _get(turn: Turn, observation: Observation, **overrides: Any) -> Observation:
    arguments: dict[str, Any] = {
        "session_id": turn.session_id,
        "turn_id": turn.id,
        "scope": "turn",
        "observation_id": observation.id,
    }
    return observation_get_for_read(**(arguments | overrides))


def test_access_by_its_own_session_and_turn(turn: Turn) -> None:
    observation = store(turn, TEXT)
    assert _get(turn, observation) == observation


def test_access_from_another_session_is_refused_as_unknown(turn: Turn) -> None:
    observation = store(turn, TEXT)
    with pytest.raises(ObservationReadError, match="No observation with scratchpad_id"):
        _get(turn, observation, session_id=uuid.uuid4())


def test_access_from_another_turn_depends_on_the_scope(turn: Turn) -> None:
    observation = store(turn, TEXT)
    with pytest.raises(ObservationReadError, match="belongs to an earlier turn"):
        _get(turn, observation, turn_id=uuid.uuid4())
    assert _get(turn, observation, turn_id=uuid.uuid4(), scope="session") == observation


def test_access_after_expiry_is_refused(turn: Turn) -> None:
    observation = store(turn, TEXT, ttl=10)
    with pytest.raises(ObservationReadError, match="expired at"):
        _get(turn, observation, now=timezone.now() + timedelta(seconds=11))


def test_scope_holds_only_live_observations(turn: Turn) -> None:
    store(turn, TEXT, now=timezone.now() - timedelta(hours=2))
    assert not observations_in_scope_exist(session_id=turn.session_id, turn_id=turn.id, scope="turn")
    store(turn, TEXT)
    assert observations_in_scope_exist(session_id=turn.session_id, turn_id=turn.id, scope="turn")


@pytest.mark.parametrize("scope", ["turn", "session"])
def test_whether_any_is_in_scope_agrees_with_the_scopes_query(turn: Turn, scope: str) -> None:
    """The every-step check (SQL built once) against `observations_in_scope` (the ORM): another
    turn's, a masked one's (readable from any turn), an expired one."""
    other_turn = Turn.objects.create(session_id=turn.session_id).id

    def agree() -> bool:
        exists = observations_in_scope_exist(session_id=turn.session_id, turn_id=other_turn, scope=scope)
        query = observations_in_scope(session_id=turn.session_id, turn_id=other_turn, scope=scope)
        assert exists == query.exists()
        return exists

    assert not agree()
    store(turn, TEXT, now=timezone.now() - timedelta(hours=2))  # expired
    assert not agree()
    made = store(turn, TEXT)  # live, of the fixture's turn
    assert agree() == (scope == "session")
    Observation.objects.filter(pk=made.pk).update(session_scope=True)  # masked: any turn reads it
    assert agree()
    Observation.objects.filter(pk=made.pk).update(session_scope=False, turn_id=other_turn)
    assert agree()


def test_gc_drops_the_content_of_expired_observations_only(turn: Turn) -> None:
    expired = store(turn, TEXT, ttl=10, now=timezone.now() - timedelta(seconds=11))
    live = store(turn, TEXT)
    assert observations_gc() == 1
    assert set(Observation.objects.all()) == {live, expired}
    assert not ObservationChunk.objects.filter(observation_id=expired.id).exists()
    assert ObservationChunk.objects.filter(observation_id=live.id).exists()
    assert observations_gc() == 0  # nothing left to drop


def test_an_expired_id_and_an_unknown_id_are_told_apart(turn: Turn) -> None:
    observation = store(turn, TEXT, ttl=10, now=timezone.now() - timedelta(seconds=11))
    observations_gc()
    with pytest.raises(ObservationReadError, match=r"expired at .*content has been dropped") as expired:
        _get(turn, observation)
    assert "No observation with scratchpad_id" not in str(expired.value)
    with pytest.raises(ObservationReadError, match="No observation with scratchpad_id 'ffffffffffffffff'"):
        _get(turn, observation, observation_id="ffffffffffffffff")


def test_an_expired_observation_of_an_earlier_turn_reads_as_expired(turn: Turn) -> None:
    observation = store(turn, TEXT, ttl=10, now=timezone.now() - timedelta(seconds=11))
    with pytest.raises(ObservationReadError, match="expired at"):
        _get(turn, observation, turn_id=uuid.uuid4())


def test_json_object_result_keeps_its_fields_for_references(turn: Turn) -> None:
    parts = result_parts({"status": 200, "items": [1, 2]})
    observation = observation_create(
        session_id=turn.session_id,
        turn_id=turn.id,
        step=1,
        tool_name="api",
        tool_use_id="toolu_1",
        parts=parts,
        ttl_seconds=60,
    )
    stored = observation_parts(observation=observation)
    assert (stored.content_is_json, stored.text) == (True, '{"status": 200, "items": [1, 2]}')
