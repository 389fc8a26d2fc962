"""Task scoping (seed 000: `begin_task` / `end_task`): one row per task. Thin model: every change
goes through `services`."""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q
from django.utils import timezone

from sessions_app.models import AgentSession


class TaskStatus(models.TextChoices):
    OPEN = "open", "Open"
    ENDED = "ended", "Ended"


class Task(models.Model):
    """A scope the agent opened with `begin_task` and closed with `end_task`. Once ended, every
    later request shows the task as one record (name and summary) where it began, instead of
    the tool calls made inside it; the stored messages are untouched."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="tasks")
    name = models.CharField(max_length=200)
    goal = models.TextField(blank=True)
    status = models.CharField(max_length=8, choices=TaskStatus.choices, default=TaskStatus.OPEN)
    # Where it began: the epoch and the position of the assistant message holding begin_task.
    begin_epoch = models.PositiveIntegerField()
    begin_position = models.PositiveIntegerField()
    begin_tool_use_id = models.CharField(max_length=128)
    end_tool_use_id = models.CharField(max_length=128, blank=True)
    summary = models.TextField(blank=True)
    # Stored messages holding a tool call or result of the task (left out of requests).
    collapsed_messages = models.PositiveIntegerField(default=0)
    # The epoch it ended in, and the tokens its collapse keeps out of that epoch's requests
    # (the dashboard's gauge).
    end_epoch = models.PositiveIntegerField(null=True, blank=True)
    tokens_saved = models.PositiveIntegerField(default=0)
    # The tool_use ids of the calls made inside the task (their blocks are left out).
    hidden_tool_use_ids = models.JSONField(default=list, blank=True)
    started_at = models.DateTimeField(default=timezone.now)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["session_id", "started_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["session"], condition=Q(status="open"), name="task_one_open_per_session"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.status})"
