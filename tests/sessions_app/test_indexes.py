"""Each write updates only the indexes reads need: the messages' and events' lookups by session
are served by the composite indexes that start with it, without an index of its own."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection

from sessions_app.models import Message, SessionEvent

pytestmark = pytest.mark.django_db


def _indexed_columns(table: str) -> list[tuple[str, ...]]:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, table)
    return [tuple(c["columns"]) for c in constraints.values() if c["index"] or c["unique"]]


@pytest.mark.parametrize("model", [Message, SessionEvent])
def test_no_index_on_the_session_alone(model):
    assert ("session_id",) not in _indexed_columns(model._meta.db_table)


@pytest.mark.parametrize("model", [Message, SessionEvent])
def test_a_lookup_by_session_still_uses_an_index(model):
    if connection.vendor != "sqlite":
        pytest.skip("the query plan is read from SQLite's EXPLAIN QUERY PLAN")
    sql, params = model.objects.filter(session_id=uuid.uuid4()).values_list("id").query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN QUERY PLAN {sql}", params)
        plan = " ".join(str(row[-1]) for row in cursor.fetchall())
    assert "USING" in plan and "INDEX" in plan, plan
    assert "SCAN" not in plan.replace("SCAN CONSTANT", ""), plan
