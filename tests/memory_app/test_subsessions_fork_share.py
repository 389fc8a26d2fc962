"""A fork's stored copy shares what is identical with its parent (issue 31, item 2): its rows
name the rows holding the contents, so a fork costs a few hundred bytes per message whatever the
contents' size; every reader of a message's content sees a fork's as its parent's; a fork of a
fork names the original; and a fork keeps its contents when the session it was copied from is
deleted."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import IntegrityError, connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from memory_app.subsessions import services as subsessions_services
from memory_app.tasks import services as tasks_services
from memory_app.tasks.models import Task
from sessions_app import selectors, services
from sessions_app.dashboard.selectors.history import archive_messages_page, transcript_page
from sessions_app.engine.archive import archive_page
from sessions_app.message_content import messages_with_content, resolved
from sessions_app.models import AgentSession, Archive, Message, ModelCall
from sessions_app.services.messages import dangling_tool_uses
from sessions_app.services.turns import _dangling_blocks
from tests.memory_app.test_subsessions_fork_limits import (
    _CONTENT_SELECTED,
    MODEL,
    fork_of,
    parent_make,
    result,
    use,
    words,
)

pytestmark = pytest.mark.django_db(transaction=True)

# Incompressible text (PostgreSQL compresses what it stores out of line): its size is its cost.
BIG_CHARS = 400_000


def big(tag: str) -> str:
    return f"{tag} {secrets.token_urlsafe(BIG_CHARS * 3 // 4)}"


def long_history() -> list[tuple[str, list[dict]]]:
    return [
        ("user", [words(big("Read these."))]),
        ("assistant", [words("Reading."), use("toolu_a")]),
        ("user", [result("toolu_a", big("A:"))]),
        ("assistant", [words(big("Summing up.")), use("toolu_b")]),
        ("user", [result("toolu_b", "B: short")]),
        ("assistant", [words("Now forking."), use("toolu_fork")]),
    ]


@contextmanager
def through_the_resolver() -> Iterator[None]:
    """What runs inside reads no message's own content column bare: every read resolves it."""
    with CaptureQueriesContext(connection) as captured:
        yield
    assert [q["sql"] for q in captured.captured_queries if _CONTENT_SELECTED.search(q["sql"])] == []


def contents_of(session: AgentSession) -> list[Any]:
    qs = messages_with_content(Message.objects.filter(session=session)).order_by("position")
    return [resolved(m) for m in qs]


def parent_contents(parent: AgentSession, count: int) -> list[Any]:
    return list(
        Message.objects.filter(session=parent, position__lt=count)
        .order_by("position")
        .values_list("content", flat=True)
    )


def database_bytes() -> int:
    """What the messages cost on disk: PostgreSQL's message table with its indexes and the
    out-of-line storage of its large values; SQLite's whole file, less its free pages."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT pg_total_relation_size(%s)", [Message._meta.db_table])
            return int(cursor.fetchone()[0])
        sizes = []
        for pragma in ("page_count", "freelist_count", "page_size"):
            cursor.execute(f"PRAGMA {pragma}")
            sizes.append(int(cursor.fetchone()[0]))
        pages, free, size = sizes
        return (pages - free) * size


# -- what a fork costs ----------------------------------------------------------------------------
def _forks_cost_far_less_than_what_they_copy() -> None:
    parent = parent_make(long_history(), fork_max_tokens=10_000_000)
    copied_bytes = sum(len(str(c)) for c in parent_contents(parent, 5))
    assert copied_bytes > 3 * BIG_CHARS
    before = database_bytes()
    forks = [fork_of(parent) for _ in range(4)]
    per_fork = (database_bytes() - before) / len(forks)
    # Before sharing, each fork stored the copied bytes again (per_fork > copied_bytes).
    assert per_fork < copied_bytes / 20, (per_fork, copied_bytes)
    for child in forks:
        assert contents_of(child) == parent_contents(parent, 5)
        assert not Message.objects.filter(session=child, content__isnull=False).exists()


def test_a_forks_stored_copy_costs_a_small_fraction_of_the_bytes_it_copies():
    _forks_cost_far_less_than_what_they_copy()


@pytest.mark.services
def test_a_forks_stored_copy_costs_a_small_fraction_of_the_bytes_it_copies_on_postgresql():
    assert connection.vendor == "postgresql"
    _forks_cost_far_less_than_what_they_copy()


def test_a_fork_of_a_fork_names_the_rows_of_the_original():
    parent = parent_make(long_history(), fork_max_tokens=10_000_000)
    child = fork_of(parent)
    grandchild = fork_of(child, tool_use_id="toolu_not_in_the_childs_history")
    originals = list(Message.objects.filter(session=parent, position__lt=5).order_by("position"))
    copies = list(Message.objects.filter(session=grandchild).order_by("position"))
    assert [m.content_source_id for m in copies] == [o.pk for o in originals]
    assert contents_of(grandchild) == [o.content for o in originals]


# -- every reader sees a fork's contents as its parent's -----------------------------------------
def _copied(parent: AgentSession) -> AgentSession:
    """A session holding copies of all of `parent`'s messages, its last one an assistant step
    whose calls were never answered (what a fork never has, but `dangling_tool_uses` reads)."""
    target = AgentSession.objects.create(model=MODEL, context_window=200_000)
    positions = list(range(Message.objects.filter(session=parent).count()))
    copied = services.messages_copy(
        source_session_id=parent.pk,
        positions=positions,
        target_session_id=target.pk,
        marker={"type": "forked", "from_session": str(parent.pk)},
    )
    AgentSession.objects.filter(pk=target.pk).update(next_position=copied)
    target.refresh_from_db()
    return target


def test_the_engines_history_and_the_outlines_read_a_forks_contents():
    parent = parent_make(long_history(), fork_max_tokens=10_000_000)
    child = _copied(parent)
    with through_the_resolver():
        rows = selectors.session_messages_after(session_id=child.pk, epoch=0, after_position=-1)
        after = selectors.session_messages_after(session_id=child.pk, epoch=0, after_position=3)
        outlines = selectors.message_outlines(session_id=child.pk, epoch=0)
    expected = selectors.session_messages_after(session_id=parent.pk, epoch=0, after_position=-1)
    assert rows == expected
    assert [r.content for r in after] == [r.content for r in expected[4:]]
    assert [o._replace(kind="") for o in outlines] == selectors.message_outlines(
        session_id=parent.pk, epoch=0
    )


def test_dangling_tool_uses_read_a_forks_last_step():
    parent = parent_make(long_history())
    child = _copied(parent)
    with through_the_resolver():
        assert dangling_tool_uses(child) == ["toolu_fork"]
        assert _dangling_blocks(child) == [use("toolu_fork")]


def test_a_recorded_request_naming_a_forks_messages_is_rebuilt_with_their_contents():
    parent = parent_make(long_history())
    child = _copied(parent)
    call = ModelCall.objects.create(
        session=child,
        provider="scripted",
        model=MODEL,
        request={"model": MODEL, "messages": [{"$messages": [0, 5]}, {"role": "user", "content": "x"}]},
        request_sha256="",
    )
    with through_the_resolver():
        body = selectors.model_call_request(call=call)
    originals = Message.objects.filter(session=parent).order_by("position")
    assert body["messages"] == [
        *({"role": m.role, "content": m.content} for m in originals),
        {"role": "user", "content": "x"},
    ]


def test_archives_and_the_compaction_carry_read_a_forks_contents():
    parent = parent_make(long_history())
    child = _copied(parent)
    expected = parent_contents(parent, 6)
    with through_the_resolver():
        _, carried = services.compaction_store(
            session_id=child.pk,
            turn_id=None,
            epoch=0,
            summary="S",
            summary_message="Summary: S",
            tokens_before=10,
            tokens_after=1,
            carry_positions=[4, 5],
        )
        archive = Archive.objects.get(session=child, epoch=0)
        archived = [resolved(m) for m in selectors.archive_messages(archive=archive)]
        page = archive_page(session_id=child.pk, offset=0, limit=10, query=None)
        items = archive_messages_page(archive=archive, limit=10).items
    assert [m.content for m in carried[1:]] == expected[4:]
    assert archived == expected
    assert [m["text"] for m in page["messages"]] == [
        m["text"]
        for m in archive_page(session_id=_archived(parent).pk, offset=0, limit=10, query=None)["messages"]
    ]
    assert any(big_text in item.text for item in items for big_text in [expected[0][0]["text"]])


def _archived(parent: AgentSession) -> AgentSession:
    services.compaction_store(
        session_id=parent.pk,
        turn_id=None,
        epoch=0,
        summary="S",
        summary_message="Summary: S",
        tokens_before=10,
        tokens_after=1,
    )
    return parent


def test_the_dashboards_transcript_shows_a_forks_contents_as_its_parents():
    parent = parent_make(long_history())
    child = _copied(parent)
    with through_the_resolver():
        shown = transcript_page(session_id=child.pk).items
    assert [(i.kind, i.text, i.tool_uses, i.name) for i in shown] == [
        (i.kind, i.text, i.tool_uses, i.name) for i in transcript_page(session_id=parent.pk).items
    ]
    assert any(i.text.startswith("Read these.") for i in shown)


def test_a_tasks_collapse_reads_a_forks_contents():
    parent = parent_make(long_history())
    child = _copied(parent)

    def inner(session: AgentSession) -> Any:
        task = Task(session=session, name="t", begin_epoch=0, begin_position=1, begin_tool_use_id="toolu_a")
        return tasks_services._inner_calls(task, "toolu_fork", 0)

    with through_the_resolver():
        of_child = inner(child)
    assert of_child == inner(parent)
    assert inner(child).hidden == ["toolu_b"] and inner(child).messages == 2


def test_the_admin_shows_a_forks_contents(admin_client: Client):
    parent = parent_make([("user", [words("The parent's words.")]), ("assistant", [words("Yes.")])])
    child = _copied(parent)
    copy = Message.objects.get(session=child, position=0)
    with through_the_resolver():
        page = admin_client.get(reverse("admin:sessions_app_message_change", args=[copy.pk]))
        listing = admin_client.get(reverse("admin:sessions_app_message_changelist") + f"?q={child.pk}")
    assert page.status_code == 200 and "The parent&#x27;s words." in page.content.decode()
    assert f"session {parent.pk}, position 0" in page.content.decode()
    assert listing.status_code == 200 and "The parent&#x27;s words." in listing.content.decode()
    # A message is not deleted alone: the copy would lose what it shares.
    holder = Message.objects.get(session=parent, position=0)
    delete = reverse("admin:sessions_app_message_delete", args=[holder.pk])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 403
    assert contents_of(child)[0] == [words("The parent's words.")]


# -- deleting the session copied from ------------------------------------------------------------
def test_a_copy_keeps_its_content_when_the_session_it_was_copied_from_is_deleted():
    parent = parent_make(long_history())
    expected = parent_contents(parent, 6)
    first, second = _copied(parent), _copied(parent)
    services.session_tree_delete(session_id=parent.pk)
    assert not AgentSession.objects.filter(pk=parent.pk).exists()
    assert contents_of(first) == expected and contents_of(second) == expected
    # Each content went to one copy (the first written), which the other now names.
    held = Message.objects.filter(session=first).order_by("position")
    assert all(m.content is not None and m.content_source_id is None for m in held)
    assert [m.content_source_id for m in Message.objects.filter(session=second).order_by("position")] == [
        m.pk for m in held
    ]
    services.session_tree_delete(session_id=first.pk)
    assert contents_of(second) == expected


def test_the_admins_delete_of_the_session_copied_from_keeps_the_copys_contents(admin_client: Client):
    parent = parent_make(long_history())
    expected = parent_contents(parent, 6)
    child = _copied(parent)
    url = reverse("admin:sessions_app_agentsession_delete", args=[parent.pk])
    assert admin_client.post(url, {"post": "yes"}).status_code == 302
    assert not AgentSession.objects.filter(pk=parent.pk).exists()
    assert contents_of(child) == expected


def test_a_forks_own_parent_and_subtree_go_together():
    parent = parent_make(long_history(), fork_max_tokens=10_000_000)
    fork_of(fork_of(parent), tool_use_id="toolu_none")
    services.session_tree_delete(session_id=parent.pk)
    assert AgentSession.objects.count() == 0 and Message.objects.count() == 0


def test_archived_messages_others_share_can_go_once_their_contents_are_kept():
    # A retention sweep of old epochs would delete messages without their session.
    parent = parent_make(long_history())
    expected = parent_contents(parent, 6)
    child = _copied(parent)
    archived = Message.objects.filter(session=parent, position__lt=6)
    with transaction.atomic():
        assert services.messages_content_keep(messages=archived) == 6
        archived.delete()
    assert contents_of(child) == expected


def test_deleting_the_session_copied_from_without_keeping_its_contents_is_refused():
    parent = parent_make(long_history())
    expected = parent_contents(parent, 6)
    child = _copied(parent)
    with pytest.raises(IntegrityError):
        AgentSession.objects.filter(pk=parent.pk).delete()
    table = connection.ops.quote_name(Message._meta.db_table)
    with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
        session_id = Message._meta.get_field("session").get_db_prep_value(parent.pk, connection)
        cursor.execute(f"DELETE FROM {table} WHERE session_id = %s", [session_id])
    assert contents_of(child) == expected and contents_of(parent) == expected


def test_a_child_discarded_before_its_turn_leaves_its_parent_whole():
    parent = parent_make(long_history(), fork_max_tokens=10_000_000)
    expected = parent_contents(parent, 6)
    child = fork_of(parent)
    assert subsessions_services.subsession_discard(child_id=child.pk) is True
    assert not Message.objects.filter(session_id=child.pk).exists()
    assert contents_of(parent) == expected
