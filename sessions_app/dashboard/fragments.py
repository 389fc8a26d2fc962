"""What the dashboard websockets push: HTML fragments that htmx's `ws` extension swaps in.

Each fragment names its target (`hx-swap-oob`): transcript items are appended, streamed text
is appended to the running step's bubble, panels (status, gauge, usage, the prompt inspector's
refresh) are replaced, and each feature's panels give their own (`DashboardPanel.live`). A batch
of events (a replay, a gap fill) renders every panel it touched once.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.template.loader import render_to_string
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from sessions_app.dashboard import selectors, transcript
from sessions_app.dashboard.panels import panels_live
from sessions_app.dashboard.usage_panel import usage_panel_context
from sessions_app.engine.features import features
from sessions_app.models import AgentSession

# Events after which the next request's size has changed (and the features' `GaugeRow.events`).
GAUGE_EVENTS = frozenset(
    {
        "user.message",
        "usage",
        "turn.completed",
        "compaction.completed",
        "compaction.masked",
        "tool.result",
        "session.updated",  # a new window or threshold: the gauge's limits moved
    }
)
STATUS_EVENTS = frozenset(
    {
        "turn.started",
        "turn.completed",
        "compaction.warning",
        "compaction.completed",
        "error",
        "session.status",
        "session.ended",
    }
)
# The session was ended: the page's message box becomes the ended notice.
ENDED_EVENT = "session.ended"
# A stored model step ends the streamed text of that step.
STREAM_END_EVENTS = frozenset({"assistant.message", "turn.completed", "error"})
# The session's calls waiting for an approval may have changed (its box is rendered again).
APPROVAL_EVENTS = frozenset(
    {"tool.approval_requested", "tool.approval_answered", "tool.result", "turn.completed"}
)
# A model call was recorded (the inspector can show it).
MODEL_CALL_EVENTS = frozenset({"usage", "compaction.completed", "turn.completed"})


@dataclass
class _Touched:
    gauge: bool = False
    status: bool = False
    ended: bool = False
    inspector: bool = False
    usage: bool = False  # a model call was recorded: the session's usage totals moved
    approvals: bool = False
    new_epoch: int | None = None


def _rendered(parts: Sequence[str]) -> SafeString:
    # Each part is a rendered (autoescaped) template: joining them keeps them safe.
    return mark_safe("".join(parts))  # noqa: S308


def _oob_append(target: str, rendered: Sequence[str]) -> str:
    return (
        format_html('<div hx-swap-oob="beforeend:{}">{}</div>', target, _rendered(rendered))
        if rendered
        else ""
    )


def only_streamed_text(events: list[dict]) -> bool:
    """Streamed text needs nothing from the database: its fragments render without a query."""
    return all(event["type"] == "assistant.delta" for event in events)


def session_fragments(*, session_id: uuid.UUID, events: list[dict], operator: str) -> str:
    """The fragments for `events` (new, in order) of one session, for the operator `operator`.

    Streamed text alone (`only_streamed_text`) reads nothing from the database.
    """
    session = (
        None if only_streamed_text(events) else selectors.session_get_for_operator(session_id=session_id)
    )
    base = {"session": session, "oob": True}
    parts: list[str] = []
    items: list[str] = []
    touched = _Touched()
    gauge_events = GAUGE_EVENTS.union(*(row.events for row in features().gauge_rows))
    for event in events:
        kind = event["type"]
        if kind == "assistant.delta":
            if items:
                parts.append(_oob_append("#transcript-items", items))
                items = []
            parts.append(
                format_html('<span hx-swap-oob="beforeend:#streaming-text">{}</span>', event.get("text", ""))
            )
            continue
        call_note = transcript.call_note_of(event)
        if call_note is not None:
            # An authored tool's progress note: under its call, as it arrives.
            if items:
                parts.append(_oob_append("#transcript-items", items))
                items = []
            note = render_to_string("dashboard/session.html#tool-note", {"note": call_note[1]})
            parts.append(_oob_append("#" + transcript.call_notes_target(call_note[0]), [note]))
        if kind in STREAM_END_EVENTS:
            parts.append(render_to_string("dashboard/session.html#streaming", {**base, "streaming": ""}))
        items += [
            render_to_string("dashboard/session.html#transcript-item", {"session": session, "item": item})
            for item in transcript.items_from_event(event)
        ]
        touched.gauge |= kind in gauge_events
        touched.status |= kind in STATUS_EVENTS
        touched.ended |= kind == ENDED_EVENT
        touched.inspector |= kind in MODEL_CALL_EVENTS
        # `session.updated`: a budget may have changed (the panel shows spend against it).
        touched.usage |= kind in MODEL_CALL_EVENTS or kind in ("error", "session.updated")
        touched.approvals |= kind in APPROVAL_EVENTS
        if kind == "compaction.completed":
            touched.new_epoch = event.get("epoch")
    parts.append(_oob_append("#transcript-items", items))
    parts.append(_oob_prepend_timeline(events))
    if session is not None:
        parts += _panels(session, touched, base)
        parts += panels_live(session, events, operator)
    parts.append(
        format_html('<span id="last-seq" data-seq="{}" hidden hx-swap-oob="true"></span>', events[-1]["seq"])
    )
    return "".join(p for p in parts if p)


def _oob_prepend_timeline(events: list[dict]) -> str:
    rows = [
        render_to_string("dashboard/context.html#timeline-row", {"frame": frame})
        for frame in reversed(events)
    ]
    return format_html('<div hx-swap-oob="afterbegin:#timeline-rows">{}</div>', _rendered(rows))


def _panels(session: AgentSession, touched: _Touched, base: dict) -> list[str]:
    parts: list[str] = []
    if touched.status:
        parts.append(render_to_string("dashboard/session.html#status", base))
        parts.append(
            format_html('<span id="session-epoch" hx-swap-oob="true">epoch {}</span>', session.epoch)
        )
    if touched.ended:
        parts.append(render_to_string("dashboard/session.html#ended", base))
    if touched.gauge:
        gauge = selectors.context_gauge(session=session)
        parts.append(render_to_string("dashboard/context.html#gauge", {**base, "gauge": gauge}))
    if touched.usage:
        parts.append(render_to_string("dashboard/usage.html#panel", {**base, **usage_panel_context(session)}))
    if touched.approvals:
        approvals = selectors.approvals_pending(session_id=session.pk)
        parts.append(
            render_to_string("dashboard/approvals.html#session-approvals", {**base, "approvals": approvals})
        )
    if touched.inspector:
        # A prompt inspector that follows the latest request reloads itself on this signal.
        parts.append(
            format_html('<span id="inspector-signal" hidden hx-swap-oob="true">{}</span>', session.pk)
        )
    if touched.new_epoch is not None:
        parts.append(
            render_to_string("dashboard/archive.html#live", {**base, "new_epoch": touched.new_epoch})
        )
    return parts


def approvals_badge_fragment() -> str:
    """The top bar's count of the tool calls waiting for an approval, as an out-of-band swap."""
    return render_to_string("dashboard/_approvals_badge.html", {"oob": True})


def session_row_fragment(*, session_id: str, filters: dict[str, Any]) -> str:
    """The session list's row of `session_id`, or its removal when it no longer matches `filters`."""
    row = selectors.session_list_row(session_id=session_id, **filters)
    if row is None:
        return format_html('<tr id="session-row-{}" data-remove hx-swap-oob="delete"></tr>', session_id)
    return render_to_string("dashboard/session_list.html#session-row", {"s": row, "oob": True})
