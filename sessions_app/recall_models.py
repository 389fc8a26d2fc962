"""The long-term search index (`recall`, DESIGN.md "Agents"): one plain-text document per thing
a session said or was told, kept by the services in the transaction of the rows it indexes, and
searched with the database's own full-text search (`recall_selectors`).

The text is searched through an index the database keeps: on SQLite an FTS5 external-content
table over this one, filled by triggers; on PostgreSQL a stored generated column
`RECALL_TS_VECTOR`, `to_tsvector(RECALL_TS_CONFIG, text)`, with a GIN index (both created by
the migration; Django does not know the column, which the database fills on every write).
Registered with Django by `models.py`.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone

# PostgreSQL's text search configuration: the expression index and every query name it, so that
# the queries use the index.
RECALL_TS_CONFIG = "english"
RECALL_TS_VECTOR = "search_vector"
# SQLite's FTS5 table over `RecallDocument` (external content: it stores no text of its own).
RECALL_FTS_TABLE = "sessions_app_recalldocument_fts"


class RecallDocument(models.Model):
    """One searchable text of a session: a message (`kind` message, `message` set), an archive's
    summary (`ref` the archive's id) or an offloaded observation's content (`ref` its id).

    A fork's copies of its parent's messages have none (they share the parent's contents: the
    parent's documents are searched instead), nor do messages whose text is indexed elsewhere
    (`common.recall_text.NOT_INDEXED_MESSAGE_TYPES`)."""

    # No index of its own: `recall_session_epoch_idx` starts with it.
    session = models.ForeignKey(
        "sessions_app.AgentSession", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    # The epoch it belongs to (a summary: the epoch it closed), so that the calling session's
    # current epoch, already in view, is left out of its searches.
    epoch = models.PositiveIntegerField()
    # DO_NOTHING, as `Message.content_source`: messages are deleted only with their session,
    # whose documents go with it (this key's own cascade would make Django read every message of
    # a deleted session to find their documents).
    message = models.ForeignKey(
        "sessions_app.Message",
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        related_name="+",
        db_index=False,
    )
    kind = models.CharField(max_length=16)
    role = models.CharField(max_length=16)
    ref = models.CharField(max_length=64, blank=True, default="")
    at = models.DateTimeField(default=timezone.now)
    text = models.TextField()

    class Meta:
        ordering = ["session_id", "epoch", "id"]
        indexes = [
            models.Index(fields=["session", "epoch"], name="recall_session_epoch_idx"),
            # The foreign key's check when messages are deleted (with their session).
            models.Index(
                fields=["message"], condition=models.Q(message__isnull=False), name="recall_message_idx"
            ),
            # An observation's document, found when its content is collected.
            models.Index(fields=["ref"], condition=~models.Q(ref=""), name="recall_ref_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} document (epoch {self.epoch})"
