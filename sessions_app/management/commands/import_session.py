"""`manage.py import_session FILE --token NAME_OR_ID`: a new session (with its sub-sessions) from
an export document (docs/export.md), owned by that client's token; all or nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from sessions_app import services
from sessions_app.engine import transfer
from sessions_app.models import AgentToken
from sessions_app.transfer_rows import DocumentError


def token_named(name_or_id: str) -> AgentToken:
    """The newest active token of that name, or the token of that id."""
    token = (
        AgentToken.objects.filter(name=name_or_id, revoked_at__isnull=True).order_by("-created_at").first()
    )
    if token is None and name_or_id.isdigit():
        token = AgentToken.objects.filter(pk=int(name_or_id), revoked_at__isnull=True).first()
    if token is None:
        raise CommandError(
            f"No active token is called {name_or_id!r} or has that id (create_agent_token NAME)."
        )
    return token


class Command(BaseCommand):
    help = f"Import a session from a JSON document ({transfer.FORMAT}) as a new session of a client."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path, help="the export document")
        parser.add_argument("--token", required=True, help="the owning client: its token's name or id")

    def handle(self, *args: Any, **options: Any) -> None:
        owner = token_named(options["token"])
        path: Path = options["file"]
        if not path.is_file():
            raise CommandError(f"No file {path}.")
        try:
            session = transfer.session_import_file(path, owner=owner)
        except (DocumentError, services.SessionQuotaExceeded) as exc:
            raise CommandError(f"Nothing was imported. {exc}") from None
        self.stdout.write(f"Imported session {session.pk} for {owner.name}.")
