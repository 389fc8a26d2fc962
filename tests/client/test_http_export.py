"""The Python client's export and import (docs/export.md) against a real daphne: the document
streamed to a file and back as a new session of the client, which goes on; an ended session
stays ended; a foreign document is refused with its code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from palimpsest_client import connect
from palimpsest_client.errors import ProtocolError
from tests.servers import Daphne


async def test_a_session_exported_to_a_file_is_imported_and_goes_on(
    daphne: Daphne, token: str, tmp_path: Path
):
    async with connect(daphne.ws_url, token) as client:
        session = await client.create_session(title="to move")
        async for _ in session.send("remember: the Q3 gap is in EMEA"):
            pass
        target = tmp_path / "session.json"
        size = await client.export_session(session.id, str(target))
        document = json.loads(target.read_text())
        assert size == target.stat().st_size and document["format"] == "palimpsest.session/1"
        state = await client.import_session(str(target))
        assert state["id"] != session.id and state["title"] == "to move" and state["status"] == "idle"
        moved = await client.attach(state["id"])
        replies = [event async for event in moved.send("echo still here")]
        assert replies[-1].type == "turn.completed"

        await client.end_session(session.id)
        ended = await client.import_session(await _exported(client, session.id, tmp_path))
        assert ended["status"] == "ended"

        with pytest.raises(ProtocolError) as refused:
            await client.import_session(b'{"format": "other.thing/1"}')
        assert refused.value.code == "invalid_document"  # type: ignore[attr-defined]


async def _exported(client: object, session_id: str, folder: Path) -> str:
    path = folder / f"{session_id}.json"
    await client.export_session(session_id, str(path))  # type: ignore[attr-defined]
    return str(path)
