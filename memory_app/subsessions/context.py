"""Sub-sessions in each model request: which tools a session is offered, and a child's guidance.

- spawn_session and fork_session: while `subsessions.enabled` and the session is above
  `subsessions.max_depth` (a root is depth 0).
- report_result: in children only (whatever their settings say: a child must be able to report).
- A child's stable system prompt ends with `CHILD_GUIDANCE`; a root's prompt is unchanged.
"""

from __future__ import annotations

from memory_app.subsessions import prompts
from memory_app.subsessions.services import SubsessionRefused, subsession_limits_check
from sessions_app.engine.contract import SessionSnapshot


def is_child(session: SessionSnapshot) -> bool:
    return session.depth > 0


def delegation_offered(session: SessionSnapshot) -> bool:
    return bool(session.setting("subsessions", "enabled")) and session.depth < session.setting(
        "subsessions", "max_depth"
    )


def delegation_refusal(session: SessionSnapshot) -> str:
    """Why spawn/fork are not offered to `session` (what the model reads if it calls them anyway)."""
    try:
        subsession_limits_check(session)
    except SubsessionRefused as exc:
        return str(exc)
    return prompts.DISABLED


class ChildSection:
    name = "subsessions"

    def static_system(self, session: SessionSnapshot) -> list[str]:
        return [prompts.CHILD_GUIDANCE] if is_child(session) else []

    def pinned_system(self, session: SessionSnapshot) -> list[str]:
        return []

    def pinned_changed(self, session: SessionSnapshot, texts: tuple[str, ...]) -> str | None:
        return None

    def dynamic_system(self, session: SessionSnapshot) -> list[str]:
        return []

    def message_prefix(self, session: SessionSnapshot) -> list[str]:
        return []


CHILD_SECTION = ChildSection()
