"""Operators' edits of the scratchpad spaces (optimistic concurrency) and what every change
leaves behind: version, revision, announced event."""

from __future__ import annotations

from typing import Any

import pytest

from memory_app.scratchpad.models import ScratchpadRevision
from memory_app.scratchpad.selectors import scratchpad_get, scratchpad_revisions
from memory_app.scratchpad.services import (
    ScratchpadActionError,
    ScratchpadConflict,
    ScratchpadInvalidValue,
    ScratchpadLimits,
    scratchpad_apply,
    scratchpad_space_set,
)
from sessions_app import announce
from sessions_app.authors import AGENT_AUTHOR, operator_author
from sessions_app.engine.sessions import session_create
from sessions_app.models import AgentSession, SessionEvent

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("without_notepad")]

ALICE = operator_author("alice")


@pytest.fixture
def session() -> AgentSession:
    return session_create(owner=None)


@pytest.fixture
def announced(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    frames: list[dict] = []
    monkeypatch.setattr(announce, "_announcer", lambda: frames.extend)
    return frames


def agent(session: AgentSession, **call: Any) -> Any:
    return scratchpad_apply(
        session_id=session.id,
        action=call["action"],
        args=call,
        author=AGENT_AUTHOR,
        limits=ScratchpadLimits.from_settings(session.settings),
    )


def test_operator_edit_at_the_current_version_writes_the_space(session: AgentSession) -> None:
    change = scratchpad_space_set(
        session_id=session.id, space="notes", value="from the operator", author=ALICE, expected_version=0
    )

    assert (change.space, change.value, change.version) == ("notes", "from the operator", 1)
    assert scratchpad_get(session_id=session.id).notes == "from the operator"


def test_operator_edit_is_announced_after_commit(
    session: AgentSession, announced: list[dict], django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        scratchpad_space_set(
            session_id=session.id, space="refs", value=["a", "b"], author=ALICE, expected_version=0
        )

    (frame,) = announced
    assert {k: frame[k] for k in ("type", "space", "value", "author", "version")} == {
        "type": "scratchpad.updated",
        "space": "refs",
        "value": ["a", "b"],
        "author": "operator:alice",
        "version": 1,
    }


def test_operator_edit_writes_a_revision(session: AgentSession) -> None:
    scratchpad_space_set(session_id=session.id, space="plan", value="1. x", author=ALICE, expected_version=0)

    (revision,) = scratchpad_revisions(session_id=session.id)
    assert (revision.space, revision.version, revision.value, revision.author, revision.action) == (
        "plan",
        1,
        "1. x",
        "operator:alice",
        "set",
    )


def test_stale_operator_edit_raises_conflict_with_the_current_value(session: AgentSession) -> None:
    agent(session, action="set_notes", content="the agent's")

    with pytest.raises(ScratchpadConflict) as raised:
        scratchpad_space_set(
            session_id=session.id, space="notes", value="mine", author=ALICE, expected_version=0
        )

    assert (raised.value.space, raised.value.current_value, raised.value.current_version) == (
        "notes",
        "the agent's",
        1,
    )


def test_stale_operator_edit_overwrites_nothing(session: AgentSession) -> None:
    agent(session, action="set_notes", content="the agent's")

    with pytest.raises(ScratchpadConflict):
        scratchpad_space_set(
            session_id=session.id, space="notes", value="mine", author=ALICE, expected_version=0
        )

    assert scratchpad_get(session_id=session.id).notes == "the agent's"
    assert ScratchpadRevision.objects.filter(session=session).count() == 1
    assert SessionEvent.objects.filter(session=session, type="scratchpad.updated").count() == 1


def test_versions_are_per_space(session: AgentSession) -> None:
    agent(session, action="refs.add", ref="src/a.py")

    change = scratchpad_space_set(
        session_id=session.id, space="notes", value="n", author=ALICE, expected_version=0
    )

    assert change.version == 1
    assert scratchpad_get(session_id=session.id).refs_version == 1


def test_operator_notes_over_the_session_limit_are_refused(session: AgentSession) -> None:
    with pytest.raises(ScratchpadInvalidValue, match="notes is 4001 chars; this session allows 4000"):
        scratchpad_space_set(
            session_id=session.id, space="notes", value="x" * 4001, author=ALICE, expected_version=0
        )

    assert scratchpad_get(session_id=session.id).notes == ""


@pytest.mark.parametrize(
    "value",
    [["a", 1], ["a", ""], ["a", "a"], "a, b", ["x" * 2001], [str(i) for i in range(51)]],
)
def test_operator_refs_must_be_distinct_non_empty_strings_within_limits(
    session: AgentSession, value: Any
) -> None:
    with pytest.raises(ScratchpadInvalidValue):
        scratchpad_space_set(
            session_id=session.id, space="refs", value=value, author=ALICE, expected_version=0
        )


def test_operator_edit_of_an_unknown_space_is_refused(session: AgentSession) -> None:
    with pytest.raises(ScratchpadInvalidValue):
        scratchpad_space_set(session_id=session.id, space="todo", value="x", author=ALICE, expected_version=0)


def test_refused_agent_action_writes_nothing(session: AgentSession) -> None:
    with pytest.raises(ScratchpadActionError):
        agent(session, action="refs.remove", ref="missing")

    assert not ScratchpadRevision.objects.filter(session=session).exists()
    assert not SessionEvent.objects.filter(session=session).exists()
    assert scratchpad_get(session_id=session.id).refs_version == 0


def test_scratchpad_survives_an_epoch_change(session: AgentSession) -> None:
    agent(session, action="set_plan", content="1. keep me")

    AgentSession.objects.filter(pk=session.id).update(epoch=1)

    assert scratchpad_get(session_id=session.id).plan == "1. keep me"
