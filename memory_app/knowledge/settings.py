"""The `knowledge` session settings (PROTOCOL.md v1.2), with their rules: the one place their
defaults are written."""

from __future__ import annotations

from typing import Any

from sessions_app.engine.contract import SessionSnapshot

REFRESH_COMPACTION = "compaction"
REFRESH_IMMEDIATE = "immediate"
REFRESH_CHOICES = {REFRESH_COMPACTION, REFRESH_IMMEDIATE}

# DESIGN.md: the learned text is at most `knowledge.learned_max_chars` (default 8,000); the
# setting may not go past the largest learned text we store in the prompt.
LEARNED_MAX_CHARS = 8_000
LEARNED_MAX_CHARS_LIMIT = 100_000
MAX_SKILLS = 64
MAX_SKILLS_LIMIT = 1_000

SETTINGS: dict[str, Any] = {
    "knowledge": {
        "learned_editable": True,
        "learned_max_chars": LEARNED_MAX_CHARS,
        "skills_writable": True,
        "max_skills": MAX_SKILLS,
        "tool_authoring": True,
        "refresh": REFRESH_COMPACTION,
    }
}
SETTINGS_RULES: dict[str, Any] = {
    "knowledge": {
        "learned_editable": ("bool",),
        "learned_max_chars": ("int", 1, LEARNED_MAX_CHARS_LIMIT),
        "skills_writable": ("bool",),
        "max_skills": ("int", 0, MAX_SKILLS_LIMIT),
        "tool_authoring": ("bool",),
        "refresh": ("choice", REFRESH_CHOICES),
    }
}


def has_agent(session: SessionSnapshot) -> bool:
    return session.agent_id is not None


def learned_editable(session: SessionSnapshot) -> bool:
    return has_agent(session) and bool(session.setting("knowledge", "learned_editable"))


def skills_writable(session: SessionSnapshot) -> bool:
    return has_agent(session) and bool(session.setting("knowledge", "skills_writable"))


def refresh_immediate(session: SessionSnapshot) -> bool:
    return session.setting("knowledge", "refresh") == REFRESH_IMMEDIATE
