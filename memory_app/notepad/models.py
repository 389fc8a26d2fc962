"""The session notepad's revisions (seed 000). The notepad itself lives on the session
(`AgentSession.notepad`, as the seed says). Thin models: every change goes through `services`."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone

from sessions_app.models import AgentSession


class NotepadOperation(models.TextChoices):
    WRITE = "write", "Write (full replacement)"
    FIND_REPLACE = "find_replace", "Find and replace"
    APPEND = "append", "Append"
    PREPEND = "prepend", "Prepend"
    DELETE = "delete", "Delete"


class NotepadRevision(models.Model):
    """One change of a session's notepad: version `n` holds the content after the n-th change.

    The notepad itself lives on the session (`AgentSession.notepad`, as the seed says); these rows
    let the dashboard show it as it was at any moment and say who changed it. A burst of edits (one
    sandbox run) shares one row, which moves to the burst's latest version, so versions a burst
    passed through have no row; the current version always has one. Past the session's
    `notepad.history_max_chars` the oldest rows lose their text (`pruned`), newest kept first.
    """

    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="notepad_revisions")
    version = models.PositiveIntegerField()
    # `agent` or `operator:<username>` (`sessions_app.authors`; PROTOCOL.md, `notepad.updated`).
    author = models.CharField(max_length=200)
    operation = models.CharField(max_length=16, choices=NotepadOperation.choices)
    content = models.TextField()
    # len(content), summed to bound the history's text per session; 0 once pruned.
    chars = models.PositiveIntegerField(default=0)
    # The text was dropped to keep the session's history within its bound (`content` is "").
    pruned = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["session_id", "version"]
        constraints = [
            models.UniqueConstraint(fields=["session", "version"], name="notepad_revision_unique_version"),
            models.CheckConstraint(condition=Q(version__gte=1), name="notepad_revision_version_from_one"),
        ]

    def __str__(self) -> str:
        return f"{self.session_id} v{self.version} ({self.author})"
