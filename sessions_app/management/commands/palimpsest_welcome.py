from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from sessions_app.engine.providers.choice import default_model, providers_configured

PASSWORD_FILE = Path(settings.BASE_DIR) / ".local" / "operator-password"
OPERATOR = "admin"


class Command(BaseCommand):
    help = "Make sure a local operator exists and print where and how to log in (used by `make run`)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", default="8000")

    def handle(self, *args: Any, **options: Any) -> None:
        User = get_user_model()
        url = f"http://{options['host']}:{options['port']}/"
        if not User.objects.filter(is_superuser=True).exists():
            password = secrets.token_urlsafe(12)
            User.objects.create_superuser(OPERATOR, email="", password=password)
            PASSWORD_FILE.parent.mkdir(exist_ok=True)
            PASSWORD_FILE.write_text(password + "\n")
            PASSWORD_FILE.chmod(0o600)
        self.stdout.write(f"\nPalimpsest is starting at {url}")
        if PASSWORD_FILE.exists():
            password = PASSWORD_FILE.read_text().strip()
            self.stdout.write(f"Log in as {OPERATOR!r} with password {password!r} (kept in {PASSWORD_FILE}).")
        else:
            self.stdout.write("Log in with your superuser (or: python manage.py createsuperuser).")
        configured = sorted(providers_configured())
        self.stdout.write(
            f"Model providers: {', '.join(configured)} (sessions default to {default_model()})."
            if configured
            else "Model provider: none configured, so the scripted model answers every session "
            "(set ANTHROPIC_API_KEY, or OPENAI_API_KEY / OPENAI_BASE_URL, for a real model)."
        )
        dev = "PALIMPSEST_DEV=1 " if settings.PALIMPSEST_DEV else ""
        port_arg = "" if str(options["port"]) == "8000" else f" PORT={options['port']}"
        self.stdout.write(
            f"Agent clients: `{dev}.venv/bin/python manage.py create_agent_token NAME` prints a token for "
            f"ws://{options['host']}:{options['port']}/ws/agent/ (revoke_agent_token NAME revokes it; "
            "the admin's Agent tokens page makes and revokes them too)"
        )
        if settings.PALIMPSEST_FS_ROOT:
            self.stdout.write(
                f"File tools read {settings.PALIMPSEST_FS_ROOT} (with the scripted model, try "
                "`read big.log then grep ERROR`)."
            )
        self.stdout.write(
            f"Chat from a terminal: `make chat{port_arg}` in another terminal (or "
            "`.venv/bin/palimpsest-chat --token TOKEN --url ...`; the Python client is `palimpsest_client`)\n"
        )
