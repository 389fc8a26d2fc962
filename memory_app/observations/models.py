"""Offloaded observations (seed 004): a large tool result stored whole, read back in slices.

The content is split into `ObservationChunk` rows of a fixed size (characters for text, bytes
for binary), recorded on the observation as `chunk_size`, so the chunks holding any character
or byte range are found by arithmetic and a slice reads only those rows: O(slice), never the
whole value. Each chunk also records the line it starts on and the line of its last character,
so a range of lines is found through an index as well.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone

from sessions_app.models import AgentSession, Turn


class ObservationKind(models.TextChoices):
    TEXT = "text", "Text"
    BINARY = "binary", "Binary"


class Observation(models.Model):
    # 16 hexadecimal characters, as the seed's `scratchpad_id`.
    id = models.CharField(primary_key=True, max_length=16, editable=False)
    # An observation belongs to its session: no other session can read it.
    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="observations")
    turn = models.ForeignKey(Turn, on_delete=models.CASCADE, related_name="observations")
    # The tool call's number in its turn (1 = the turn's first tool call): `{{stepN.field}}`.
    step = models.PositiveIntegerField()
    tool_name = models.CharField(max_length=64)
    tool_use_id = models.CharField(max_length=128)
    kind = models.CharField(max_length=8, choices=ObservationKind.choices)
    # True when the content is the JSON text of the whole result (a result without a string
    # `content` field): its fields are then keys of that JSON object.
    content_is_json = models.BooleanField(default=False)
    size_bytes = models.PositiveBigIntegerField()
    char_count = models.PositiveBigIntegerField(help_text="characters of text; bytes of binary")
    line_count = models.PositiveBigIntegerField(default=0)
    sha256 = models.CharField(max_length=64)
    chunk_size = models.PositiveIntegerField(help_text="characters (text) or bytes (binary) per chunk")
    summary = models.TextField()
    # The result's other fields (path, bytes, encoding, ...), shown to the model as is.
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    # A tool result masked by compaction: readable from any turn of its session, and kept as long
    # as the session (its placeholder may stay in the history for good).
    session_scope = models.BooleanField(default=False)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["session", "turn"], name="observation_session_turn_idx"),
            models.Index(fields=["expires_at"], name="observation_expires_idx"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(chunk_size__gt=0), name="observation_chunk_size_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.id} ({self.tool_name}, {self.size_bytes} bytes)"

    @property
    def is_binary(self) -> bool:
        return self.kind == ObservationKind.BINARY


class ObservationChunk(models.Model):
    """One piece of an observation's content: `text` for a text observation, `data` for binary."""

    observation = models.ForeignKey(Observation, on_delete=models.CASCADE, related_name="chunks")
    index = models.PositiveIntegerField()
    text = models.TextField(blank=True, default="")
    data = models.BinaryField(null=True, blank=True)
    # Offsets of the chunk's first character in the whole content: characters (text) or bytes
    # (binary), and its UTF-8 byte offset.
    start_char = models.PositiveBigIntegerField()
    start_byte = models.PositiveBigIntegerField()
    # Lines are numbered from 1; `end_line` is the line of the chunk's last character.
    start_line = models.PositiveBigIntegerField(default=1)
    end_line = models.PositiveBigIntegerField(default=1)

    class Meta:
        ordering = ["observation_id", "index"]
        constraints = [
            models.UniqueConstraint(fields=["observation", "index"], name="observation_chunk_unique_index"),
        ]
        indexes = [
            models.Index(fields=["observation", "end_line"], name="observation_chunk_line_idx"),
        ]
