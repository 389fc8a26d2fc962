"""Sessions, their messages and events, the turns that write them, and the model calls they make.

Models are thin: every state change goes through `sessions_app.services`, every query that a view,
consumer or tool needs through `sessions_app.selectors`.
"""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q
from django.utils import timezone

# The agents' and the search index's models live in their own modules (this one is long enough);
# imported here so that Django registers them with the app, and re-exported.
from sessions_app.agent_models import (
    Agent,
    AgentMcpServer,
    AgentPart,
    AgentSkill,
    AgentStateEntry,
    AgentTool,
    AgentVersion,
)
from sessions_app.recall_models import RecallDocument

__all__ = [
    "Agent",
    "AgentMcpServer",
    "AgentPart",
    "AgentSkill",
    "AgentStateEntry",
    "AgentTool",
    "AgentVersion",
    "RecallDocument",
]


class TimestampedModel(models.Model):
    created_at = models.DateTimeField(default=timezone.now, db_index=True, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


class AgentToken(TimestampedModel):
    """A bearer token of one agent client. Only the SHA-256 of the token is stored."""

    name = models.CharField(max_length=100)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    # The first characters of the token, to tell tokens apart in the admin without revealing them.
    prefix = models.CharField(max_length=16, editable=False)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class SessionStatus(models.TextChoices):
    IDLE = "idle", "Idle"
    RUNNING = "running", "Running"
    COMPACTING = "compacting", "Compacting"
    ERROR = "error", "Error"
    # `session.end` (PROTOCOL.md v1.2): takes no more messages; still readable and attachable.
    ENDED = "ended", "Ended"


class AgentSession(TimestampedModel):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # Null for sessions an operator created from the dashboard: no agent client owns them.
    owner = models.ForeignKey(
        AgentToken, null=True, blank=True, on_delete=models.PROTECT, related_name="sessions"
    )
    # When `session.end` asked to end it (PROTOCOL.md v1.2): from then on no turn begins; its status
    # becomes `ended` once no turn runs (a running one is cancelled first).
    ended_at = models.DateTimeField(null=True, blank=True, editable=False)
    # The agent whose session this is (DESIGN.md, "Agents"), or null: a session without one.
    agent = models.ForeignKey(Agent, null=True, blank=True, on_delete=models.PROTECT, related_name="sessions")
    title = models.CharField(max_length=200, blank=True)
    model = models.CharField(max_length=100)
    system_prompt = models.TextField(blank=True)
    context_window = models.PositiveIntegerField()
    compact_threshold = models.FloatField(default=0.8)
    # The full settings object of PROTOCOL.md, validated and with every default filled in.
    settings = models.JSONField(default=dict)
    # Tools the client implements itself: [{name, description, input_schema}].
    client_tools = models.JSONField(default=list, blank=True)
    status = models.CharField(max_length=16, choices=SessionStatus.choices, default=SessionStatus.IDLE)
    epoch = models.PositiveIntegerField(default=0, editable=False)
    # Allocators: incremented under the session's row lock inside the writing transaction.
    last_seq = models.PositiveBigIntegerField(default=0, editable=False)
    next_position = models.PositiveIntegerField(default=0, editable=False)
    # The previous response's prompt size (input + cache creation + cache read), for compaction.
    last_prompt_tokens = models.PositiveIntegerField(null=True, blank=True, editable=False)
    # Our local estimate of that same request, and the observed ratio provider/local: new
    # estimates are scaled by it (Claude's tokenizer counts differently from cl100k).
    last_estimated_tokens = models.PositiveIntegerField(null=True, blank=True, editable=False)
    token_ratio = models.FloatField(default=1.0, editable=False)
    last_activity_at = models.DateTimeField(default=timezone.now, db_index=True)
    # The turn lease: one turn at a time per session, across every server process.
    current_turn_id = models.UUIDField(null=True, blank=True, editable=False)
    lease_expires_at = models.DateTimeField(null=True, blank=True, editable=False)
    # Who holds the lease: a fresh id for each runner of a turn (the turn's first, and any process
    # that takes a dead turn over). A turn's writes check it, so a process that stalled past its
    # lease writes nothing once another process has taken the same turn over.
    lease_holder = models.UUIDField(null=True, blank=True, editable=False)
    # The process holding the lease: its host (`common.processes.process_host`) and pid. Another
    # process on that host that finds the pid gone takes the turn over at once, without waiting
    # for the lease to run out.
    lease_host = models.CharField(max_length=255, blank=True, default="", editable=False)
    lease_pid = models.PositiveIntegerField(null=True, blank=True, editable=False)
    cancel_requested = models.BooleanField(default=False, editable=False)
    # The session notepad (seed 000): null until first written. Changed only through the notepad
    # feature's services (row lock, version check, revision, event), hence not editable here.
    notepad = models.TextField(null=True, blank=True, editable=False)
    notepad_version = models.PositiveIntegerField(default=0, editable=False)
    # The system-prompt texts the context sections pinned for the current epoch (the notepad as
    # of the epoch's start, in position `epoch`): {"epoch": N, "sections": {name: [text, ...]}}.
    # Taken at the epoch's first request and shown unchanged until the next compaction, so that
    # a memory edit does not rewrite the prompt cache's prefix (`engine.context`).
    context_pins = models.JSONField(default=dict, blank=True, editable=False)
    # Summary calls that failed in a row: at COMPACTION_BREAKER_FAILURES the engine stops trying
    # them until a new turn or an operator's compaction resets it (DESIGN.md).
    compaction_failures = models.PositiveSmallIntegerField(default=0, editable=False)
    # Sub-sessions (seed 000's `spawn_session` / `fork_session`): a child is a full session with a
    # parent. `root_session` is null for a root (a root is its own root: `root_id`), so creating a
    # root needs nothing; `depth` is 0 for a root. `spawn_mode` and `spawned_by_tool_use_id` say how
    # the child was made and by which of the parent's tool calls. Set once, at creation.
    parent_session = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="children", editable=False
    )
    root_session = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="descendants", editable=False
    )
    depth = models.PositiveSmallIntegerField(default=0, editable=False)
    spawn_mode = models.CharField(max_length=8, blank=True, editable=False)
    spawned_by_tool_use_id = models.CharField(max_length=128, blank=True, editable=False)
    # Running totals of every model call's usage (turn steps, summaries, failed calls), added in
    # the transaction that records the call (`services.model_call_record`): the dashboard shows
    # and sorts by them without summing a long session's calls on every view.
    usage_model_calls = models.PositiveIntegerField(default=0, editable=False)
    usage_input_tokens = models.PositiveBigIntegerField(default=0, editable=False)
    usage_output_tokens = models.PositiveBigIntegerField(default=0, editable=False)
    usage_cache_creation_tokens = models.PositiveBigIntegerField(default=0, editable=False)
    usage_cache_read_tokens = models.PositiveBigIntegerField(default=0, editable=False)

    class Meta:
        ordering = ["-last_activity_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(compact_threshold__gt=0) & Q(compact_threshold__lte=1),
                name="session_compact_threshold_in_range",
            ),
            models.CheckConstraint(condition=Q(context_window__gt=0), name="session_context_window_positive"),
            # A root has no parent, no root and depth 0; a child has all three.
            models.CheckConstraint(
                condition=Q(parent_session__isnull=True, root_session__isnull=True, depth=0)
                | Q(parent_session__isnull=False, root_session__isnull=False, depth__gte=1),
                name="session_tree_consistent",
            ),
        ]
        indexes = [
            # Each process's sweep for turns whose process died (leases that ran out).
            models.Index(
                fields=["lease_expires_at"],
                condition=Q(lease_expires_at__isnull=False),
                name="session_lease_expiry_idx",
            ),
            # Retention's purge: the root sessions that ended before a time.
            models.Index(
                fields=["ended_at"],
                condition=Q(ended_at__isnull=False, parent_session__isnull=True),
                name="session_root_ended_idx",
            ),
            # A token's sessions created in the last minute (`services.session_quota_check`).
            models.Index(fields=["owner", "created_at"], name="session_owner_created_idx"),
            # A token's sub-sessions running a turn (the sub-sessions' per-client bound).
            models.Index(
                fields=["owner"],
                condition=Q(current_turn_id__isnull=False, depth__gte=1),
                name="session_owner_running_idx",
            ),
        ]

    def __str__(self) -> str:
        return self.title or str(self.id)

    @property
    def root_id(self) -> uuid.UUID:
        """The id of the root of this session's tree (its own id for a root)."""
        return self.root_session_id or self.id


class Turn(models.Model):
    """One user message and everything the model did in answer to it."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="turns")
    started_at = models.DateTimeField(default=timezone.now)
    ended_at = models.DateTimeField(null=True, blank=True)
    steps = models.PositiveIntegerField(default=0)
    stop_reason = models.CharField(max_length=32, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-started_at"]

    def __str__(self) -> str:
        return f"turn {self.id}"


class MessageRole(models.TextChoices):
    USER = "user", "User"
    ASSISTANT = "assistant", "Assistant"


class Message(models.Model):
    """A message of the session's history, content blocks exactly as sent to the model.

    Messages are never edited or deleted: compaction only moves the session to a new epoch.

    Its content is held by its own row (`content`), or shared with the row that holds it
    (`content_source`, `content` null): a fork's copies of its parent's messages share the
    parent's contents (issue 31 item 2). The row named always holds its content itself (a fork of
    a fork names the original), and before it is deleted with its session, a row that shares it
    is given the content (`services.messages_content_keep`). Read a message's content through
    `sessions_app.message_content`, which resolves both, never from `content` alone.
    """

    # No index of its own: the unique (session, position) and `message_epoch_idx` both start
    # with it, and every message written would update a third index for nothing.
    session = models.ForeignKey(
        AgentSession, on_delete=models.CASCADE, related_name="messages", db_index=False
    )
    position = models.PositiveIntegerField()
    epoch = models.PositiveIntegerField(default=0)
    role = models.CharField(max_length=16, choices=MessageRole.choices)
    content = models.JSONField(null=True, blank=True)
    # The database's foreign key refuses (at commit) deleting a row whose content others share
    # without them; the service that deletes sessions gives it to one of them first. DO_NOTHING,
    # not RESTRICT: Django would then read every message of a deleted session to check it (7
    # times slower for 50,000 messages), where the key checks them all at once. No index of its
    # own: the partial one below holds only the rows that share.
    content_source = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        related_name="content_sharers",
        db_index=False,
        editable=False,
    )
    token_estimate = models.PositiveIntegerField(default=0)
    turn = models.ForeignKey(Turn, null=True, blank=True, on_delete=models.SET_NULL, related_name="messages")
    # Free-form markers, e.g. {"type": "compact", "previous_archive": ...} on a summary message.
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["session_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["session", "position"], name="message_unique_position"),
            # Its own content or another row's, never both nor neither.
            models.CheckConstraint(
                condition=Q(content__isnull=False, content_source__isnull=True)
                | Q(content__isnull=True, content_source__isnull=False),
                name="message_content_held_or_shared",
            ),
        ]
        indexes = [
            models.Index(fields=["session", "epoch", "position"], name="message_epoch_idx"),
            # The rows sharing a content: found when the row holding it is about to be deleted.
            models.Index(
                fields=["content_source"],
                condition=Q(content_source__isnull=False),
                name="message_content_source_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.role} message at position {self.position} (epoch {self.epoch})"


class SessionEvent(models.Model):
    """Everything a client or operator could see, in order: `seq` is gapless per session."""

    # No index of its own: the unique (session, seq) starts with it.
    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="events", db_index=False)
    seq = models.PositiveBigIntegerField()
    type = models.CharField(max_length=64)
    payload = models.JSONField(default=dict)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["session_id", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["session", "seq"], name="event_unique_seq"),
            models.CheckConstraint(condition=Q(seq__gte=1), name="event_seq_from_one"),
        ]

    def as_frame(self) -> dict:
        """The event as sent to clients (PROTOCOL.md: type, session_id, seq, ts, then its fields)."""
        return {
            "type": self.type,
            "session_id": str(self.session_id),
            "seq": self.seq,
            "ts": self.created_at.isoformat(),
            **self.payload,
        }

    def __str__(self) -> str:
        return f"{self.type} #{self.seq}"


class Archive(models.Model):
    """One compaction: the epoch it closed, its summary, and a link to the archive before it.

    The archived messages stay where they are (`Message.epoch == epoch`): never copied or deleted.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="archives")
    epoch = models.PositiveIntegerField()
    summary = models.TextField()
    message_count = models.PositiveIntegerField()
    tokens_before = models.PositiveIntegerField()
    tokens_after = models.PositiveIntegerField()
    # RESTRICT, not PROTECT: an archive alone cannot be deleted while a later one names it, but
    # deleting its session takes the whole chain (PROTECT refused that too: issue 30 item 14).
    previous = models.OneToOneField(
        "self", null=True, blank=True, on_delete=models.RESTRICT, related_name="next_archive"
    )
    created_at = models.DateTimeField(default=timezone.now)
    # The compaction's receipt: what triggered it (`threshold`, `prompt_too_long`, `operator`), how
    # long it took, how many of the running turn's messages the new epoch kept verbatim, and the
    # tool results masked on the way.
    trigger = models.CharField(max_length=32, blank=True)
    duration_ms = models.PositiveIntegerField(default=0)
    kept_messages = models.PositiveIntegerField(default=0)
    masked = models.JSONField(default=list, blank=True)
    # What it summarized: `history`, the history before the running turn (or, for an operator's,
    # the whole epoch); `turn`, the running turn's own older steps (its request and newest steps
    # kept verbatim, issue 31 item 8).
    kind = models.CharField(max_length=16, default="history")

    class Meta:
        ordering = ["session_id", "epoch"]
        constraints = [models.UniqueConstraint(fields=["session", "epoch"], name="archive_unique_epoch")]

    def __str__(self) -> str:
        return f"archive of epoch {self.epoch}"


class MaskedResult(models.Model):
    """A tool result that requests show as a short placeholder (compaction's cheap tier): the
    stored message keeps the result; the whole result is also an observation the model can read
    back with `scratchpad_read` (`observation_id`, empty when no feature could store it)."""

    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="masked_results")
    epoch = models.PositiveIntegerField()
    tool_use_id = models.CharField(max_length=128)
    observation_id = models.CharField(max_length=16, blank=True)
    size_chars = models.PositiveBigIntegerField()
    placeholder = models.TextField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["session_id", "epoch", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["session", "epoch", "tool_use_id"], name="masked_result_unique")
        ]

    def __str__(self) -> str:
        return f"masked result {self.tool_use_id} (epoch {self.epoch})"


class ToolExecutor(models.TextChoices):
    SERVER = "server", "Server"
    CLIENT = "client", "Client"


class ToolCallStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    DONE = "done", "Done"


class ToolCall(models.Model):
    """A tool the model asked for; a client tool stays pending until the client's tool.result."""

    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="tool_calls")
    turn = models.ForeignKey(Turn, on_delete=models.CASCADE, related_name="tool_calls")
    tool_use_id = models.CharField(max_length=128)
    name = models.CharField(max_length=64)
    input = models.JSONField(default=dict)
    executor = models.CharField(max_length=8, choices=ToolExecutor.choices)
    status = models.CharField(max_length=8, choices=ToolCallStatus.choices, default=ToolCallStatus.PENDING)
    # What the tool returned (a string or content blocks), before anything the engine does with it.
    result = models.JSONField(null=True, blank=True)
    is_error = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)
    completed_at = models.DateTimeField(null=True, blank=True)
    # Tool approvals (`common.approvals`): a server call whose policy is `always_ask` is stored
    # `pending` with its step and runs only once answered (`approved`; `denied`: the model reads a
    # tool error with the reason). `approval_author`: who answered (`client:<token name>`,
    # `operator:<username>`). Empty for a call nobody was asked about.
    approval = models.CharField(max_length=8, blank=True, default="")
    approval_reason = models.TextField(blank=True, default="")
    approval_author = models.CharField(max_length=200, blank=True, default="")
    approval_at = models.DateTimeField(null=True, blank=True)
    # When a step that waited for approvals began running its server calls: a turn whose process
    # died before then runs them on another process; after, they are not run twice.
    started_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["session_id", "created_at"]
        constraints = [
            models.UniqueConstraint(fields=["session", "tool_use_id"], name="toolcall_unique_id"),
        ]
        indexes = [
            # The dashboard's list of the approvals waiting across sessions.
            models.Index(
                fields=["created_at"],
                name="toolcall_approval_pending",
                condition=models.Q(approval="pending", status="pending"),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} call {self.tool_use_id}"


class RequestPart(models.Model):
    """A part of model requests stored once and named by its content: the canonical JSON text of
    a request's `tools` (the same ~7 KB at every step of every session with the same tools). A
    call's record names it `{"$part": sha256}`. Parts are shared by every record that names them
    and are never deleted: a process remembers which it has stored and does not store them
    again (a database emptied or restored under a running server would leave later records
    naming parts it lacks; their rebuilt requests then do not verify)."""

    sha256 = models.CharField(max_length=64, primary_key=True)
    text = models.TextField()
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return self.sha256[:12]


class ModelCall(models.Model):
    """One request to the model and its answer, for the prompt inspector and the benchmarks.

    `request` is the exact request, except that a run of stored messages sent unchanged is
    recorded as `{"$messages": [first, last]}` (positions), a stored message sent with blocks
    added or marked as `{"$message": position, "$content": [...]}` (`common.request_record`), and
    the tools as `{"$part": sha256}` (`RequestPart`); `selectors.model_call_request` rebuilds the
    exact body, and
    `request_sha256` (over the canonical JSON of the rebuilt body, keys sorted) proves it.
    """

    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="model_calls")
    turn = models.ForeignKey(
        Turn, null=True, blank=True, on_delete=models.SET_NULL, related_name="model_calls"
    )
    step = models.PositiveIntegerField(default=0)
    purpose = models.CharField(max_length=16, default="turn")
    provider = models.CharField(max_length=32)
    model = models.CharField(max_length=100)
    request = models.JSONField()
    request_sha256 = models.CharField(max_length=64)
    request_bytes = models.PositiveIntegerField(default=0)
    # Bytes at the start of this request identical to the previous request's start: what prompt
    # caching can reuse.
    stable_prefix_bytes = models.PositiveIntegerField(default=0)
    # The local estimate of this request (cl100k), and the calibrated prediction of the provider's
    # count that compaction decided on.
    estimated_prompt_tokens = models.PositiveIntegerField(default=0)
    predicted_prompt_tokens = models.PositiveIntegerField(default=0)
    response = models.JSONField(null=True, blank=True)
    stop_reason = models.CharField(max_length=32, blank=True)
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    cache_creation_input_tokens = models.PositiveIntegerField(default=0)
    cache_read_input_tokens = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    started_at = models.DateTimeField(default=timezone.now)
    duration_ms = models.PositiveIntegerField(default=0)
    first_token_ms = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["session_id", "started_at"]

    @property
    def prompt_tokens(self) -> int:
        return self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens

    def __str__(self) -> str:
        return f"{self.purpose} call, step {self.step}"
