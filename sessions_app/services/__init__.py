"""Every state change of sessions, turns, messages, tool calls and events, one module per entity.

Rules that hold for every service here:
- A change and the `SessionEvent`s announcing it are written in one transaction; events reach
  watchers only after commit (`announce_on_commit`).
- `seq` is allocated by incrementing `AgentSession.last_seq` inside that transaction, which takes
  the session's row lock until commit: concurrent writers queue, so `seq` is gapless.
- Message positions are allocated the same way from `AgentSession.next_position`.

Callers use `from sessions_app import services` and `services.turn_begin(...)`: the names below
are the package's public surface.
"""

from __future__ import annotations

from sessions_app.common.types import ModelCallData, PlannedToolCall, ToolOutcome
from sessions_app.services.archives import (
    COMPACTION_BREAKER_FAILURES,
    CompactionConflict,
    compaction_failure_record,
    compaction_masked_announce,
    compaction_operator_begin,
    compaction_operator_end,
    compaction_store,
    compaction_turn_store,
    compaction_warning_store,
    masked_result_store,
    masked_results_copy,
)
from sessions_app.services.events import event_emit, events_emit
from sessions_app.services.messages import messages_content_keep, messages_copy
from sessions_app.services.sessions import (
    SESSION_UPDATABLE_FIELDS,
    SESSIONS_QUOTA_PERIOD_SECONDS,
    SessionQuotaExceeded,
    agent_token_lock,
    default_model,
    session_context_pins_store,
    session_insert,
    session_quota_check,
    session_settings_update,
    session_status_set,
    session_tree_delete,
)
from sessions_app.services.steps import (
    assistant_step_store,
    assistant_step_store_last,
    model_call_record,
    tool_call_submit_result,
    tool_result_blocks,
    tool_results_store,
)
from sessions_app.services.tokens import (
    TOKEN_PREFIX,
    agent_token_authenticate,
    agent_token_create,
    agent_token_hash,
    agent_token_revoke,
)
from sessions_app.services.turns import (
    INTERRUPTED_TOOL_RESULT,
    SERVER_STOPPED_CODE,
    SERVER_STOPPED_TOOL_RESULT,
    NoTurnInProgress,
    TokenRevoked,
    ToolResultAlreadyGiven,
    TurnInProgress,
    TurnLeaseLost,
    TurnNeedsRepair,
    TurnRepair,
    UnknownToolUse,
    lease_hold,
    lease_lapsed,
    lease_takeover_at,
    turn_begin,
    turn_cancel_request,
    turn_deltas_emit,
    turn_error_emit,
    turn_finish,
    turn_heartbeat,
    turn_is_cancelled,
    turn_repair,
    turns_cancel_for_owners,
    turns_stop_asked,
)

__all__ = [
    "COMPACTION_BREAKER_FAILURES",
    "compaction_failure_record",
    "compaction_masked_announce",
    "compaction_operator_begin",
    "compaction_operator_end",
    "masked_result_store",
    "masked_results_copy",
    "INTERRUPTED_TOOL_RESULT",
    "SERVER_STOPPED_CODE",
    "SERVER_STOPPED_TOOL_RESULT",
    "TOKEN_PREFIX",
    "CompactionConflict",
    "ModelCallData",
    "NoTurnInProgress",
    "PlannedToolCall",
    "TokenRevoked",
    "ToolOutcome",
    "ToolResultAlreadyGiven",
    "TurnInProgress",
    "TurnNeedsRepair",
    "TurnLeaseLost",
    "TurnRepair",
    "UnknownToolUse",
    "agent_token_authenticate",
    "agent_token_lock",
    "agent_token_create",
    "agent_token_hash",
    "agent_token_revoke",
    "assistant_step_store",
    "assistant_step_store_last",
    "compaction_store",
    "compaction_turn_store",
    "compaction_warning_store",
    "default_model",
    "event_emit",
    "events_emit",
    "lease_hold",
    "lease_lapsed",
    "lease_takeover_at",
    "messages_content_keep",
    "messages_copy",
    "model_call_record",
    "SESSION_UPDATABLE_FIELDS",
    "SESSIONS_QUOTA_PERIOD_SECONDS",
    "SessionQuotaExceeded",
    "session_context_pins_store",
    "session_insert",
    "session_quota_check",
    "session_settings_update",
    "session_status_set",
    "session_tree_delete",
    "tool_call_submit_result",
    "tool_result_blocks",
    "tool_results_store",
    "turn_begin",
    "turn_cancel_request",
    "turn_deltas_emit",
    "turn_error_emit",
    "turn_finish",
    "turn_heartbeat",
    "turn_is_cancelled",
    "turn_repair",
    "turns_cancel_for_owners",
    "turns_stop_asked",
]
