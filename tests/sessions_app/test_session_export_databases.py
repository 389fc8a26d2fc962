"""A session exported from a SQLite database (by `manage.py export_session` in another process)
and imported into PostgreSQL (`manage.py import_session`) makes the same next request as the
original made on SQLite; the commands' own refusals."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core.management import CommandError, call_command

from sessions_app.models import AgentSession
from tests.servers import manage, server_env
from tests.sessions_app.transfer_support import next_request, normalised

pytestmark = pytest.mark.django_db(transaction=True)


def _session_ids(tree: dict) -> list[str]:
    return [tree["session"]["id"], *(i for child in tree["children"] for i in _session_ids(child))]


def _new_ids(session_id: uuid.UUID) -> list[str]:
    ids = [str(session_id)]
    for child in AgentSession.objects.filter(parent_session_id=session_id).order_by("created_at", "id"):
        ids.extend(_new_ids(child.pk))
    return ids


@pytest.mark.services
async def test_a_sqlite_export_imported_into_postgresql_makes_the_same_next_request(
    connect: Any, make_token: Any, vendor: str, tmp_path: Path
) -> None:
    assert vendor == "postgresql"
    env = server_env(DATABASE_URL=f"sqlite:///{tmp_path / 'source.sqlite3'}")
    env.pop("REDIS_URL", None)
    manage("migrate", "--no-input", env=env)
    script = "from tests.sessions_app.transfer_script import {}"
    original = manage("shell", "-c", script.format("build; build()"), env=env).strip().splitlines()[-1]
    document_path = tmp_path / "session.json"
    manage("export_session", original, "-o", str(document_path), env=env)
    before_path = tmp_path / "before.json"
    manage(
        "shell", "-c", script.format(f"next_request; next_request('{original}', '{before_path}')"), env=env
    )

    raw = await make_token("importer")
    await sync_to_async(call_command)("import_session", str(document_path), "--token", "importer")
    imported = await sync_to_async(lambda: AgentSession.objects.filter(parent_session__isnull=True).get())()
    document = json.loads(document_path.read_text())
    assert document["session"]["children"] and document["session"]["archives"]
    pairs = dict(
        zip(await sync_to_async(_new_ids)(imported.pk), _session_ids(document["session"]), strict=True)
    )
    after = await next_request(connect, raw, imported.pk)
    before = json.loads(before_path.read_text())
    assert normalised(after, pairs) == normalised(before, {})


def test_the_commands_refuse_what_they_cannot_do_and_write_nothing(
    transactional_db: Any, tmp_path: Path
) -> None:
    from sessions_app import services

    services.agent_token_create(name="importer")
    with pytest.raises(CommandError, match="No session has the id"):
        call_command("export_session", str(uuid.uuid4()))
    with pytest.raises(CommandError, match="No session has the id"):
        call_command("export_session", "nope")
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "palimpsest.session/2"}')
    with pytest.raises(CommandError, match="No active token is called 'nobody'"):
        call_command("import_session", str(bad), "--token", "nobody")
    with pytest.raises(CommandError, match="Nothing was imported. format: version '2' is not supported"):
        call_command("import_session", str(bad), "--token", "importer")
    with pytest.raises(CommandError, match="No file"):
        call_command("import_session", str(tmp_path / "missing.json"), "--token", "importer")
    assert not AgentSession.objects.exists()


def test_export_session_writes_the_document_to_a_file_or_standard_output(
    transactional_db: Any, tmp_path: Path
) -> None:
    import io

    from sessions_app import services
    from sessions_app.engine import sessions as engine_sessions

    token, _ = services.agent_token_create(name="exporter")
    session = engine_sessions.session_create(owner=token, title="to a file")
    out = io.StringIO()
    call_command("export_session", str(session.pk), stdout=out)
    assert json.loads(out.getvalue())["session"]["session"]["title"] == "to a file"
    path = tmp_path / "doc.json"
    call_command("export_session", str(session.pk), "-o", str(path), stderr=io.StringIO())
    assert json.loads(path.read_text()) == {
        **json.loads(out.getvalue()),
        "exported_at": json.loads(path.read_text())["exported_at"],
    }
    out = io.StringIO()
    call_command("import_session", str(path), "--token", str(token.pk), stdout=out)
    imported = AgentSession.objects.exclude(pk=session.pk).get()
    assert f"Imported session {imported.pk} for exporter." in out.getvalue()
    assert imported.title == "to a file" and imported.owner_id == token.pk
