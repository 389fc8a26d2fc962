from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from sessions_app import services


class Command(BaseCommand):
    help = "Create a bearer token for an agent client. The token is printed once, as the last line."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="who or what the token is for")

    def handle(self, *args: Any, **options: Any) -> None:
        name = options["name"].strip()
        if not name:
            self.stderr.write("The name must not be empty.")
            raise SystemExit(2)
        token, raw = services.agent_token_create(name=name)
        self.stdout.write(
            f"Created token {token.prefix}… for {token.name!r}. Store it now: only its hash is kept."
        )
        self.stdout.write(raw)
