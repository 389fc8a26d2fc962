"""Template filters of the operator dashboard. Nothing here marks unsanitized text safe."""

from __future__ import annotations

import json
from typing import Any

from django import template
from django.utils.safestring import SafeString

from sessions_app.common.content import content_text
from sessions_app.dashboard import panels, selectors
from sessions_app.dashboard.markdown import markdown_to_html
from sessions_app.dashboard.selectors import history
from sessions_app.dashboard.selectors.history import TimelineRow
from sessions_app.dashboard.transcript import result_text

register = template.Library()

SUMMARY_CHARS = 140
PAYLOAD_SHOWN_CHARS = 4000


@register.simple_tag
def approvals_waiting() -> int:
    """How many tool calls wait for an approval across sessions (the top bar's count)."""
    return selectors.approvals_pending_count()


@register.simple_tag
def panel_keys() -> dict[str, str]:
    """The session page's keys of its panels (every tab but the transcript's), for the shortcuts
    dialog: `first`, `last` and the panels' `labels`."""
    keyed = [tab for tab in panels.session_tabs() if tab.key and tab.name != panels.TRANSCRIPT_TAB]
    return {"first": keyed[0].key, "last": keyed[-1].key, "labels": ", ".join(tab.label for tab in keyed)}


@register.filter
def markdown(text: Any) -> SafeString:
    """Markdown as sanitized HTML (see `sessions_app.dashboard.markdown`)."""
    return markdown_to_html(str(text or ""))


@register.filter
def tokens(value: Any) -> str:
    """12345 → "12.3k", 50000 → "50k", 1200000 → "1.2M"."""
    if value is None or value == "":
        return "–"
    number = float(value)
    for size, unit in ((1_000_000, "M"), (1000, "k")):
        if abs(number) >= size:
            scaled = number / size
            text = f"{scaled:.0f}" if abs(scaled) >= 100 else f"{scaled:.1f}".removesuffix(".0")
            return text + unit
    return str(int(number))


@register.filter
def percent_of(part: Any, whole: Any) -> float:
    try:
        return min(100.0, max(0.0, 100.0 * float(part) / float(whole)))
    except (TypeError, ValueError, ZeroDivisionError):
        return 0.0


@register.filter
def css_percent(value: Any) -> str:
    """A percentage for a style attribute, locale-proof ("12.50")."""
    try:
        return f"{float(value):.2f}"
    except (TypeError, ValueError):
        return "0"


def _short(text: str, limit: int = SUMMARY_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


@register.filter
def timeline_rows(frames: list[dict]) -> list[TimelineRow]:
    """The timeline's frames with each run of deltas folded into one row."""
    return history.timeline_rows(frames)


@register.filter
def short(text: Any) -> str:
    return _short(str(text))


@register.filter
def event_summary(frame: dict) -> str:
    """One line saying what an event is about, for the timeline."""
    kind = frame.get("type")
    if kind == "user.message":
        return _short(str(frame.get("content", "")))
    if kind == "assistant.delta":
        return _short(str(frame.get("text", "")))
    if kind == "assistant.message":
        blocks = frame.get("content") or []
        text = content_text(blocks, sep=" ")
        calls = [str(b.get("name")) for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"]
        return _short(text + (f" → {', '.join(calls)}" if calls else ""))
    if kind == "tool.call":
        arguments = json.dumps(frame.get("input", {}), ensure_ascii=False)
        return _short(f"{frame.get('name')} ({frame.get('executor')}) {arguments}")
    if kind == "tool.result":
        status = "error" if frame.get("is_error") else "ok"
        offloaded = f" · observation {frame['observation_id']}" if frame.get("observation_id") else ""
        return _short(f"{frame.get('name')} {status}{offloaded}: {result_text(frame.get('content'))}")
    if kind == "notepad.updated":
        return f"version {frame.get('version')} by {frame.get('author')}"
    if kind == "scratchpad.updated":
        return f"{frame.get('space')} version {frame.get('version')} by {frame.get('author')}"
    if kind == "usage":
        return (
            f"in {frame.get('input_tokens')} · out {frame.get('output_tokens')} · cache read "
            f"{frame.get('cache_read_input_tokens')} · cache write {frame.get('cache_creation_input_tokens')}"
        )
    if kind == "compaction.warning":
        return f"about {frame.get('estimated_tokens')} tokens, threshold {frame.get('threshold_tokens')}"
    if kind == "compaction.completed":
        masked = len(frame.get("masked") or [])
        # `kind` (an addition): "turn" when a long turn's own older steps were summarized.
        what = ", the turn's steps" if frame.get("kind") == "turn" else ""
        return (
            f"epoch {frame.get('epoch')} ({frame.get('trigger', 'threshold')}{what}): "
            f"{frame.get('tokens_before')} → {frame.get('tokens_after')} tokens, "
            f"{frame.get('kept_messages', 0)} kept, {masked} masked"
        )
    if kind == "compaction.masked":
        return f"{len(frame.get('masked') or [])} tool results masked: {frame.get('tokens_before')} → " + str(
            frame.get("tokens_after")
        )
    if kind == "compaction.failed":
        return _short(f"{frame.get('failures_in_a_row')} in a row: {frame.get('message')}")
    if kind == "turn.completed":
        return str(frame.get("stop_reason", ""))
    if kind == "session.status":
        return str(frame.get("status", ""))
    if kind == "error":
        return _short(f"{frame.get('code')}: {frame.get('message')}")
    return ""


@register.filter
def event_payload(frame: dict) -> str:
    """The event's own fields as JSON (cut short for very large ones)."""
    payload = {k: v for k, v in frame.items() if k not in ("type", "session_id", "seq", "ts")}
    text = json.dumps(payload, ensure_ascii=False, indent=2)
    if len(text) > PAYLOAD_SHOWN_CHARS:
        text = text[:PAYLOAD_SHOWN_CHARS] + f"\n… ({len(text) - PAYLOAD_SHOWN_CHARS} more characters)"
    return text


@register.filter
def event_time(frame: dict) -> str:
    """The event's time of day (HH:MM:SS) from its ISO timestamp."""
    ts = str(frame.get("ts", ""))
    return ts[11:19] if len(ts) >= 19 else ts


@register.filter
def event_family(frame: dict) -> str:
    """A CSS class for the kind of event (`turn`, `assistant`, `tool`, `memory`, ...)."""
    return str(frame.get("type", "")).split(".")[0]


@register.filter
def join_lines(value: Any) -> str:
    """A list as one item a line (autoescaped like any text)."""
    if isinstance(value, list):
        return "\n".join(str(v) for v in value)
    return str(value)


@register.filter
def pretty_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2)
