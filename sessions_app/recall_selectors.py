"""`recall`'s search (DESIGN.md "Agents"): the long-term index's documents matching a plain
query, ranked by the database (SQLite FTS5's bm25, PostgreSQL's ts_rank_cd), best first, ties
newest first, each with a passage around its first match.

Whose documents are searched:
- a session of an agent: every session of that agent (the agent is its owner's: another
  client's agent of the same name is another agent), their live histories, archived epochs,
  summaries and observations, except the calling session's current epoch (already in view);
- a session without an agent: its own documents of the epochs before its current one (every
  archive, not only the latest) and its summaries, and those of the messages its archived
  epochs share with the session it was forked from (a fork's copies have no documents of
  their own);
- an agent without a calling session (the dashboard): all of the agent's.
The statement names the full-text index's expression, so the database answers from its index and
returns at most `limit` rows (LIMIT in SQL).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from django.db import connection

from sessions_app.common.recall_text import fts5_query, passage, query_words, tsquery_text
from sessions_app.models import Agent, AgentSession, Message, RecallDocument
from sessions_app.recall_models import RECALL_FTS_TABLE, RECALL_TS_CONFIG, RECALL_TS_VECTOR

# DESIGN.md: `limit` defaults to 5, at most 20.
RECALL_DEFAULT_LIMIT = 5
RECALL_MAX_LIMIT = 20
# The newest matches a search ranks (`recall_statement`).
RECALL_RANK_CANDIDATES = 2_000
# The longest query: a search is a handful of words, never a document.
RECALL_QUERY_MAX_CHARS = 2_000


class RecallQueryEmpty(ValueError):
    """The query has no word to search for (letters or digits)."""


class RecallScope(Protocol):
    """What the search needs of the calling session (a row, or the engine's snapshot)."""

    @property
    def id(self) -> uuid.UUID: ...
    @property
    def epoch(self) -> int: ...
    @property
    def agent_id(self) -> int | None: ...


@dataclass(frozen=True)
class RecallHit:
    session_id: uuid.UUID
    session_title: str
    at: datetime
    role: str
    text: str  # the passage, at most PASSAGE_MAX_CHARS
    # Where it is, for the dashboard's links (not shown to the model).
    message_id: int | None
    epoch: int
    kind: str

    def as_result(self) -> dict[str, Any]:
        """The hit as the `recall` tool gives it (DESIGN.md)."""
        return {
            "session_id": str(self.session_id),
            "session_title": self.session_title,
            "at": self.at.isoformat(),
            "role": self.role,
            "text": self.text,
        }


def _q(name: str) -> str:
    return connection.ops.quote_name(name)


def _scope_sql(session: RecallScope | None, agent: Agent | None) -> tuple[str, list[Any]]:
    """The condition on the document `d` that keeps it in scope, and its parameters."""
    sessions = _q(AgentSession._meta.db_table)
    messages = _q(Message._meta.db_table)
    session_field = AgentSession._meta.pk
    assert session_field is not None

    def sid(value: uuid.UUID) -> Any:
        return session_field.get_db_prep_value(value, connection)

    agent_id = agent.pk if agent is not None else (session.agent_id if session is not None else None)
    if agent_id is not None:
        sql = f"d.session_id IN (SELECT {_q('id')} FROM {sessions} WHERE agent_id = %s)"
        params: list[Any] = [agent_id]
        if session is not None:
            sql += " AND NOT (d.session_id = %s AND d.epoch >= %s)"
            params += [sid(session.id), session.epoch]
        return sql, params
    if session is None:
        raise ValueError("recall_search needs a session or an agent")
    sql = (
        "((d.session_id = %s AND d.epoch < %s) OR d.message_id IN ("
        f"SELECT content_source_id FROM {messages} WHERE session_id = %s AND epoch < %s "
        "AND content_source_id IS NOT NULL))"
    )
    return sql, [sid(session.id), session.epoch, sid(session.id), session.epoch]


def recall_statement(scope: str, limit: int) -> str:
    """The search's SQL: the documents matching the query (its parameter, first; on PostgreSQL
    again after `scope`'s) that meet `scope` (an SQL condition on the document `d`), ranked, at
    most `limit`.

    Only the newest RECALL_RANK_CANDIDATES matches in scope are ranked: a query of words that
    most documents hold would otherwise score every one of them (hundreds of thousands in a
    large store) for five hits; a query of rarer words has fewer matches than that, and all of
    them are ranked."""
    documents = _q(RecallDocument._meta.db_table)
    sessions = _q(AgentSession._meta.db_table)
    columns = (
        f"d.{_q('id')}, d.session_id, d.epoch, d.message_id, d.kind, d.role, d.ref, d.{_q('at')}, "
        f"d.{_q('text')}, s.title AS session_title"
    )
    candidates = int(RECALL_RANK_CANDIDATES)
    if connection.vendor == "sqlite":
        fts = _q(RECALL_FTS_TABLE)
        return (
            f"SELECT {columns} FROM ("
            f"SELECT {fts}.rowid AS rid, bm25({fts}) AS score FROM {fts} "
            f"JOIN {documents} AS d ON d.{_q('id')} = {fts}.rowid "
            f"WHERE {fts} MATCH %s AND {scope} ORDER BY {fts}.rowid DESC LIMIT {candidates}"
            f") AS m JOIN {documents} AS d ON d.{_q('id')} = m.rid "
            f"JOIN {sessions} AS s ON s.{_q('id')} = d.session_id "
            f"ORDER BY m.score, d.{_q('at')} DESC LIMIT {int(limit)}"
        )
    # The stored vector the migration's GIN index is over: the index answers the match, and the
    # ranking reads the vector instead of parsing each matching text again. The query is written
    # out where it is used (its text a parameter each time, not a CTE's column), so the planner
    # sees it and estimates its matches: a rare word is found through the index, a word most
    # documents hold by walking the newest documents until the candidates are found.
    vector = f"d.{_q(RECALL_TS_VECTOR)}"
    query = f"to_tsquery('{RECALL_TS_CONFIG}', %s)"
    return (
        f"WITH m AS MATERIALIZED (SELECT d.{_q('id')} AS rid FROM {documents} AS d "
        f"WHERE {vector} @@ {query} AND {scope} ORDER BY d.{_q('id')} DESC LIMIT {candidates}) "
        f"SELECT {columns} FROM m JOIN {documents} AS d ON d.{_q('id')} = m.rid "
        f"JOIN {sessions} AS s ON s.{_q('id')} = d.session_id "
        f"ORDER BY ts_rank_cd({vector}, {query}) DESC, d.{_q('at')} DESC LIMIT {int(limit)}"
    )


def recall_search(
    *,
    query: str,
    limit: int = RECALL_DEFAULT_LIMIT,
    session: RecallScope | None = None,
    agent: Agent | None = None,
) -> list[RecallHit]:
    """The documents in scope (the module's docstring) that match any word of `query`, best
    first, at most `limit` (1 to RECALL_MAX_LIMIT). `query` is plain words: anything but letters
    and digits only separates them, so no query is the database's syntax and none raises.
    `RecallQueryEmpty` when it has no word."""
    words = query_words(query)
    if not words:
        raise RecallQueryEmpty("The query has no words to search for: give one or more plain words.")
    limit = max(1, min(int(limit), RECALL_MAX_LIMIT))
    scope, params = _scope_sql(session, agent)
    match = fts5_query(words) if connection.vendor == "sqlite" else tsquery_text(words)
    sql = recall_statement(scope, limit)
    # PostgreSQL's statement names the query twice: to match, then to rank.
    ranked_again = [match] if connection.vendor == "postgresql" else []
    documents = RecallDocument.objects.raw(sql, [match, *params, *ranked_again])
    return [
        RecallHit(
            session_id=d.session_id,
            session_title=getattr(d, "session_title", None) or "",  # the statement's own column
            at=d.at,
            role=d.role,
            text=passage(d.text, words),
            message_id=d.message_id,
            epoch=d.epoch,
            kind=d.kind,
        )
        for d in documents
    ]
