"""Every read of the operator dashboard, composed from the apps' selectors, one module per
concern: `sessions` (the list), `history` (transcript, archives, stream, timeline), `gauge`,
`inspector` (and `prefix_break`: where a request stopped sharing the previous one's prefix),
`turn_usage` (usage and cost per turn), `memory_history` (the history pages of a memory a
feature keeps versions of), `subsessions` (trees of sessions), `agents` (the Agents section: the
list, an agent's histories, skills, state and sessions). What the features show in their
panels they read themselves, from their own selectors.

Operators may see every session, but a session, archive, model call or observation named in a
URL is always looked up within its session: a bad or foreign id is `NotFound`, never a crash.
Each selector runs a bounded number of queries, whatever the size of the session.

Callers use `from sessions_app.dashboard import selectors` and `selectors.transcript_page(...)`:
the names below are the package's public surface.
"""

from __future__ import annotations

from sessions_app.dashboard.selectors.agents import (
    AGENT_LIST_PAGE_SIZE,
    AGENT_SESSIONS_SHOWN,
    AGENT_STATE_PAGE_SIZE,
    OPERATORS_OWNER,
    TEXT_PARTS,
    PartHistory,
    StatePage,
    agent_get_for_operator,
    agent_list,
    agent_list_page,
    agent_part_history,
    agent_sessions,
    agent_skills,
    agent_state_page,
    agent_versions_latest,
)
from sessions_app.dashboard.selectors.approvals import (
    APPROVALS_SHOWN,
    PendingApproval,
    approvals_pending,
)
from sessions_app.dashboard.selectors.common import NotFound, session_get_for_operator
from sessions_app.dashboard.selectors.gauge import (
    GAUGE_LABELS,
    ContextGauge,
    GaugePart,
    SavedTokens,
    context_gauge,
)
from sessions_app.dashboard.selectors.history import (
    ARCHIVE_MESSAGES_PAGE_SIZE,
    TIMELINE_SIZE,
    TRANSCRIPT_PAGE_SIZE,
    ArchivedPage,
    ArchiveStep,
    TranscriptPage,
    archive_messages_page,
    archive_step,
    stream_in_progress,
    timeline,
    transcript_page,
)
from sessions_app.dashboard.selectors.inspector import (
    INSPECTOR_MESSAGES_SHOWN,
    InspectedBlock,
    InspectedMessage,
    InspectedRequest,
    InspectedTool,
    model_call_get,
    request_inspect,
)
from sessions_app.dashboard.selectors.memory_history import (
    HISTORY_PAGE_SIZE,
    Against,
    DiffLine,
    HistoryEntry,
    LineDiff,
    MemoryHistory,
    history_version_choose,
    line_diff,
    memory_history_make,
)
from sessions_app.dashboard.selectors.prefix_break import PrefixBreak, prefix_break
from sessions_app.dashboard.selectors.recall import (
    DashboardHit,
    MessageInPlace,
    RecallQueryEmpty,
    message_in_place,
    search_hits,
)
from sessions_app.dashboard.selectors.sessions import (
    SESSION_LIST_PAGE_SIZE,
    session_list,
    session_list_row,
    session_models,
    session_owners,
)
from sessions_app.dashboard.selectors.subsessions import (
    TREE_ROWS_SHOWN,
    TreeRow,
    descendant_count,
    session_tree,
    subsession_tree_shown,
    transcript_link_children,
)
from sessions_app.dashboard.selectors.turn_usage import (
    TURN_USAGE_PAGE_SIZE,
    TurnUsage,
    TurnUsagePage,
    turn_usage_page,
)
from sessions_app.selectors import approvals_pending_count

__all__ = [
    "APPROVALS_SHOWN",
    "PendingApproval",
    "approvals_pending",
    "approvals_pending_count",
    "DashboardHit",
    "MessageInPlace",
    "RecallQueryEmpty",
    "message_in_place",
    "search_hits",
    "AGENT_LIST_PAGE_SIZE",
    "AGENT_SESSIONS_SHOWN",
    "AGENT_STATE_PAGE_SIZE",
    "OPERATORS_OWNER",
    "TEXT_PARTS",
    "PartHistory",
    "StatePage",
    "agent_get_for_operator",
    "agent_list",
    "agent_list_page",
    "agent_part_history",
    "agent_sessions",
    "agent_skills",
    "agent_state_page",
    "agent_versions_latest",
    "ARCHIVE_MESSAGES_PAGE_SIZE",
    "HISTORY_PAGE_SIZE",
    "GAUGE_LABELS",
    "INSPECTOR_MESSAGES_SHOWN",
    "SESSION_LIST_PAGE_SIZE",
    "TIMELINE_SIZE",
    "TRANSCRIPT_PAGE_SIZE",
    "TREE_ROWS_SHOWN",
    "TURN_USAGE_PAGE_SIZE",
    "Against",
    "ArchiveStep",
    "ArchivedPage",
    "ContextGauge",
    "DiffLine",
    "GaugePart",
    "HistoryEntry",
    "InspectedBlock",
    "InspectedMessage",
    "InspectedRequest",
    "InspectedTool",
    "LineDiff",
    "MemoryHistory",
    "NotFound",
    "PrefixBreak",
    "SavedTokens",
    "TranscriptPage",
    "TreeRow",
    "TurnUsage",
    "TurnUsagePage",
    "archive_messages_page",
    "archive_step",
    "context_gauge",
    "descendant_count",
    "history_version_choose",
    "line_diff",
    "memory_history_make",
    "model_call_get",
    "prefix_break",
    "request_inspect",
    "session_get_for_operator",
    "session_list",
    "session_list_row",
    "session_models",
    "session_owners",
    "session_tree",
    "stream_in_progress",
    "subsession_tree_shown",
    "timeline",
    "transcript_link_children",
    "transcript_page",
    "turn_usage_page",
]
