"""`recall_search`: whose documents a search reaches (an agent's sessions, never another
owner's; a session's own archives; never the calling session's current epoch), ranked by the
database, the query as plain words whatever it holds, passages cut around the first match."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions_app import recall_selectors, services
from sessions_app.common.recall_text import PASSAGE_MAX_CHARS, passage
from sessions_app.models import AgentSession, Message
from sessions_app.recall_selectors import RECALL_MAX_LIMIT, RecallQueryEmpty, recall_search, recall_statement
from tests.sessions_app.recall_support import (
    agent_make,
    compact,
    exchange,
    session_make,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("vendor")]


def texts(hits) -> list[str]:
    return [hit.text for hit in hits]


def fresh(session: AgentSession) -> AgentSession:
    return AgentSession.objects.get(pk=session.pk)


def test_a_session_of_an_agent_finds_what_another_session_of_it_was_told():
    agent = agent_make()
    first = session_make(agent, title="Monday")
    exchange(first, "My cat is called Pixel.", "A fine name.")
    second = session_make(agent)
    (hit,) = recall_search(session=fresh(second), query="cat", limit=5)
    assert (hit.session_id, hit.session_title, hit.role, hit.text) == (
        first.pk,
        "Monday",
        "user",
        "My cat is called Pixel.",
    )
    assert hit.as_result()["at"] == hit.at.isoformat() and hit.message_id is not None


def test_another_owners_agent_of_the_same_name_is_never_searched():
    mine = session_make(agent_make("helper", owner="ann"))
    theirs = session_make(agent_make("helper", owner="bob"))
    exchange(theirs, "bob's secret is marmalade", "kept")
    exchange(session_make(agent_make("other", owner="ann")), "marmalade in another agent", "ok")
    assert recall_search(session=fresh(mine), query="marmalade", limit=20) == []


def test_the_calling_sessions_current_epoch_is_left_out_and_its_archives_are_not():
    agent = agent_make()
    session = session_make(agent)
    exchange(session, "the vault is in Oslo", "noted")
    assert recall_search(session=fresh(session), query="vault", limit=5) == []
    compact(session, "They spoke of a place.")
    exchange(session, "another vault mention, in view", "ok")
    assert texts(recall_search(session=fresh(session), query="vault", limit=5)) == ["the vault is in Oslo"]


def test_a_session_without_an_agent_searches_all_its_archives_and_summaries_only():
    session = session_make()
    exchange(session, "first epoch: heron", "ok")
    compact(session, "summary one mentions heron")
    exchange(session, "second epoch: heron again", "ok")
    compact(session, "summary two")
    exchange(session, "current epoch: heron in view", "ok")
    other = session_make()
    exchange(other, "another session's heron", "ok")
    compact(other, "x")
    found = sorted(texts(recall_search(session=fresh(session), query="heron", limit=20)))
    assert found == ["first epoch: heron", "second epoch: heron again", "summary one mentions heron"]


def test_a_fork_without_an_agent_reaches_its_copied_history_once_archived():
    parent = session_make()
    exchange(parent, "the ferry leaves at nine", "ok")
    fork = session_make()
    services.messages_copy(
        source_session_id=parent.pk, positions=[0, 1], target_session_id=fork.pk, marker={}
    )
    AgentSession.objects.filter(pk=fork.pk).update(next_position=2)
    assert recall_search(session=fresh(fork), query="ferry", limit=5) == []  # in view
    compact(fork, "x")
    (hit,) = recall_search(session=fresh(fork), query="ferry", limit=5)
    assert hit.text == "the ferry leaves at nine"
    assert Message.objects.filter(session=fork, content__isnull=False).count() == 1  # only the summary


def test_the_dashboards_search_of_an_agent_reaches_every_session_of_it():
    agent = agent_make()
    session = session_make(agent)
    exchange(session, "otter facts", "ok")
    assert texts(recall_search(agent=agent, query="otter", limit=5)) == ["otter facts"]


def test_more_and_rarer_terms_rank_first_and_ties_go_newest_first():
    agent = agent_make()
    old = session_make(agent)
    exchange(old, "apple", "ok")
    new = session_make(agent)
    exchange(new, "apple", "ok")
    both = session_make(agent)
    exchange(both, "apple and quince together", "ok")
    caller = session_make(agent)
    hits = recall_search(session=fresh(caller), query="apple quince", limit=5)
    assert [h.session_id for h in hits] == [both.pk, new.pk, old.pk]


@pytest.mark.parametrize(
    "query",
    [
        '"unbalanced',
        'say "quoted" words',
        "NEAR(a b)",
        "apple*",
        "-apple",
        "apple:*",
        "a & b | !c",
        "col:apple",
        "AND OR NOT",
        "(apple",
        "'apple'",
        "apple\\",
        "apple " * 5_000,
    ],
)
def test_hostile_queries_never_raise_and_search_their_words(query):
    agent = agent_make()
    exchange(session_make(agent), "an apple a day", "ok")
    hits = recall_search(session=fresh(session_make(agent)), query=query, limit=5)
    if "apple" in query.casefold():
        assert texts(hits) == ["an apple a day"]


@pytest.mark.parametrize("query", ["", "   ", "!!! *** ---", '""'])
def test_a_query_without_words_is_refused(query):
    with pytest.raises(RecallQueryEmpty):
        recall_search(session=fresh(session_make(agent_make())), query=query, limit=5)


def test_the_limit_is_applied_by_the_database():
    agent = agent_make()
    for index in range(RECALL_MAX_LIMIT + 5):
        exchange(session_make(agent), f"walnut number {index}", "ok")
    caller = fresh(session_make(agent))
    assert len(recall_search(session=caller, query="walnut", limit=3)) == 3
    with CaptureQueriesContext(connection) as captured:
        assert len(recall_search(session=caller, query="walnut", limit=500)) == RECALL_MAX_LIMIT
    (statement,) = [q["sql"] for q in captured.captured_queries]
    assert statement.rstrip().endswith(f"LIMIT {RECALL_MAX_LIMIT}")


def test_only_the_newest_matches_in_scope_are_ranked(monkeypatch):
    """A query most documents match ranks the newest RECALL_RANK_CANDIDATES of them (in scope:
    another owner's newer matches take no place among them); fewer matches are all ranked."""
    agent = agent_make()
    exchange(session_make(agent), "quince quince quince quince, the best match, told first", "ok")
    for index in range(3):
        exchange(session_make(agent), f"one quince among many other words, number {index}", "ok")
    exchange(session_make(agent_make(owner="someone else")), "quince quince quince quince", "ok")
    caller = fresh(session_make(agent))
    assert "the best match" in recall_search(session=caller, query="quince", limit=1)[0].text
    monkeypatch.setattr(recall_selectors, "RECALL_RANK_CANDIDATES", 3)
    hits = recall_search(session=caller, query="quince", limit=5)
    assert len(hits) == 3 and not any("the best match" in h.text for h in hits)


def test_a_hit_shows_a_passage_around_its_first_match():
    agent = agent_make()
    exchange(session_make(agent), "filler " * 400 + "the kingfisher nests here " + "tail " * 400, "ok")
    (hit,) = recall_search(session=fresh(session_make(agent)), query="kingfisher", limit=1)
    assert len(hit.text) <= PASSAGE_MAX_CHARS
    assert "kingfisher" in hit.text and hit.text.startswith("…") and hit.text.endswith("…")


def test_a_passage_goes_where_most_query_words_are_together_at_words_starts():
    text = (
        "the engineer of the question "
        + "x " * 700
        + "roster note: the on-call engineer is Tomasz Lindqvist"
        + " y" * 700
    )
    shown = passage(text, ["on", "call", "engineer"])
    assert "Tomasz" in shown and len(shown) <= PASSAGE_MAX_CHARS
    assert passage("z" * 1500 + " question " + "z" * 1500 + " on top", ["on"]).rstrip("…").endswith("on top")


def test_a_passage_finds_a_stem_and_keeps_a_short_text_whole():
    assert passage("short", ["x"]) == "short"
    text = "a" * 2000 + " compaction " + "b" * 2000
    assert "compaction" in passage(text, ["compacting"])


def test_on_postgresql_the_match_is_the_full_text_indexs_expression():
    """Without a scope to narrow it first, the statement's match is answered by the GIN index
    (a scope as narrow as one agent's few sessions may be read through its own index first)."""
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's plan")
    exchange(session_make(agent_make()), "walnut", "ok")
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN " + recall_statement("TRUE", 5), ["'walnut'", "'walnut'"])
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "recall_text_fts_idx" in plan
