"""`manage.py export_session ID [-o FILE]`: the session (with its sub-sessions) as one JSON
document (docs/export.md), written piece by piece to FILE or standard output."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from sessions_app.engine import transfer
from sessions_app.models import AgentSession


class Command(BaseCommand):
    help = f"Export a session as one JSON document ({transfer.FORMAT}) to FILE or standard output."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("session_id", help="the session's id")
        parser.add_argument("-o", "--output", type=Path, help="the file to write (default: standard output)")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            session_id = uuid.UUID(options["session_id"])
            pieces = transfer.export_chunks(session_id)
        except (ValueError, AgentSession.DoesNotExist):
            raise CommandError(f"No session has the id {options['session_id']!r}.") from None
        output: Path | None = options["output"]
        if output is None:
            for piece in pieces:
                self.stdout.write(piece, ending="")
            return
        partial = output.with_name(output.name + ".partial")
        with partial.open("w", encoding="utf-8") as file:
            for piece in pieces:
                file.write(piece)
        partial.replace(output)
        self.stderr.write(f"Exported session {session_id} to {output}.")
