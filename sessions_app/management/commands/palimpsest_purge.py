from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from sessions_app.engine.retention import retention_cutoff, sessions_purge


class Command(BaseCommand):
    help = (
        "Delete the ended sessions past retention (PALIMPSEST_RETENTION_DAYS, or --days), each root "
        "with its sub-sessions and everything they hold, through the same delete as the dashboard's "
        "and the API's. --dry-run lists them and deletes nothing."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--dry-run", action="store_true", help="list what would be deleted; delete nothing"
        )
        parser.add_argument(
            "--days", type=int, default=None, help="retention in days (default: PALIMPSEST_RETENTION_DAYS)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        days = options["days"] if options["days"] is not None else settings.PALIMPSEST_RETENTION_DAYS
        if days is None:
            raise CommandError("Retention is off: set PALIMPSEST_RETENTION_DAYS, or pass --days N.")
        if days < 1:
            raise CommandError(f"--days must be at least 1, got {days}.")
        dry_run = options["dry_run"]
        purge = sessions_purge(days=days, dry_run=dry_run)
        cutoff = retention_cutoff(days=days).isoformat(timespec="seconds")
        for session_id in purge.deleted:
            self.stdout.write(f"{'would delete' if dry_run else 'deleted'} {session_id}")
        for session_id in purge.skipped:
            self.stdout.write(f"left {session_id}: a turn runs in its tree")
        verb = "Would delete" if dry_run else "Deleted"
        self.stdout.write(
            f"{verb} {len(purge.deleted)} ended session tree(s), {purge.sessions_deleted} session(s) in all, "
            f"that ended before {cutoff} ({days} days)."
        )
