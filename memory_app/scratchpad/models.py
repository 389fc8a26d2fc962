"""The scratchpad spaces of seed 003: notes, plan and refs per session, with a revision trail.

One `Scratchpad` row per session (created on its first write) holds the three spaces, each with
its own version so that an operator editing one space never conflicts with the agent changing
another. Every change also writes a `ScratchpadRevision` (the space's value after the change).
`memory_app.models` re-exports these models, so Django finds them.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone

from sessions_app.models import AgentSession, TimestampedModel


class ScratchpadSpace(models.TextChoices):
    NOTES = "notes", "Notes"
    PLAN = "plan", "Plan"
    REFS = "refs", "Refs"


class Scratchpad(TimestampedModel):
    session = models.OneToOneField(
        AgentSession, primary_key=True, on_delete=models.CASCADE, related_name="scratchpad"
    )
    notes = models.TextField(blank=True, default="")
    plan = models.TextField(blank=True, default="")
    # A list of non-empty, distinct strings, oldest first.
    refs = models.JSONField(default=list, blank=True)
    notes_version = models.PositiveIntegerField(default=0)
    plan_version = models.PositiveIntegerField(default=0)
    refs_version = models.PositiveIntegerField(default=0)
    # The session's turn count when any space last changed (for `nudge_turns_since_last_use`).
    changed_at_turn = models.PositiveIntegerField(default=0)

    class Meta:
        verbose_name = "scratchpad"

    def __str__(self) -> str:
        return f"scratchpad of {self.session_id}"

    def value_of(self, space: str) -> str | list[str]:
        if space == ScratchpadSpace.NOTES:
            return self.notes
        if space == ScratchpadSpace.PLAN:
            return self.plan
        return list(self.refs)

    def version_of(self, space: str) -> int:
        return {"notes": self.notes_version, "plan": self.plan_version, "refs": self.refs_version}[space]

    @property
    def is_empty(self) -> bool:
        return not (self.notes or self.plan or self.refs)


class ScratchpadRevision(models.Model):
    """One change of one space: who made it, with which action, and the value after it."""

    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="scratchpad_revisions")
    space = models.CharField(max_length=8, choices=ScratchpadSpace.choices)
    version = models.PositiveIntegerField()
    value = models.JSONField()
    # `agent` or `operator:<username>` (`sessions_app.authors`).
    author = models.CharField(max_length=200)
    # The agent's tool action (`set_notes`, `refs.add`, ...) or `set` for an operator's edit.
    action = models.CharField(max_length=16)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["session_id", "space", "version"]
        constraints = [
            models.UniqueConstraint(
                fields=["session", "space", "version"], name="scratchpad_revision_unique_version"
            ),
            models.CheckConstraint(condition=Q(version__gte=1), name="scratchpad_revision_version_from_one"),
        ]

    def __str__(self) -> str:
        return f"{self.space} v{self.version} by {self.author}"
