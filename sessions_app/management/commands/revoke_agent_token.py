from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from sessions_app import tokens


class Command(BaseCommand):
    help = (
        "Revoke every active token with this name. Its open connections, in any server process, "
        "are closed with 4401 within PALIMPSEST_TOKEN_RECHECK_SECONDS."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="the name the token was created with")

    def handle(self, *args: Any, **options: Any) -> None:
        name = options["name"].strip()
        revoked = tokens.agent_tokens_revoke_named(name=name)
        if not revoked:
            raise CommandError(f"No active token is called {name!r}.")
        self.stdout.write(f"Revoked {revoked} token{'s' if revoked != 1 else ''} called {name!r}.")
