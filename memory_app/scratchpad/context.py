"""The scratchpad's place in each model request (a `ContextSection`, seeds 001 and 003).

- Guidance (seed 001's `## Session Scratchpad`, three spaces) in the stable system prompt.
- Before the latest user message, for this call only (never stored in history):
  first the due `[Hint: ...]` lines (one text block), then the block with the non-empty spaces
  inside seed 001's markers (another text block). Seed 001's order: steer, scratchpad, message.
- With `scratchpad.enabled = false`, nothing at all.

The block:

    [Session Scratchpad - your persistent working memory]
    ## Notes (812/4000 chars)
    <notes as written>

    ## Plan (35/2000 chars)
    <plan as written>

    ## Refs (2/50)
    - src/auth/login.ts
    - https://github.com/org/repo/issues/42
    [End Scratchpad]
"""

from __future__ import annotations

from memory_app.scratchpad import prompts
from memory_app.scratchpad.selectors import ScratchpadView, scratchpad_get, scratchpad_hints
from memory_app.scratchpad.services import ScratchpadLimits
from sessions_app.engine.contract import SessionSnapshot

NUDGE_SETTINGS = (
    "nudge_after_turns",
    "nudge_on_plan_detected",
    "nudge_after_compaction",
    "nudge_turns_since_last_use",
)


def scratchpad_enabled(session: SessionSnapshot) -> bool:
    return bool(session.setting("scratchpad", "enabled"))


def scratchpad_block_render(*, view: ScratchpadView, limits: ScratchpadLimits) -> str | None:
    """The block of the non-empty spaces, or None when every space is empty."""
    parts: list[str] = []
    if view.notes:
        heading = prompts.BLOCK_NOTES_HEADING.format(used=len(view.notes), limit=limits.notes_max_chars)
        parts.append(f"{heading}\n{view.notes}")
    if view.plan:
        heading = prompts.BLOCK_PLAN_HEADING.format(used=len(view.plan), limit=limits.plan_max_chars)
        parts.append(f"{heading}\n{view.plan}")
    if view.refs:
        heading = prompts.BLOCK_REFS_HEADING.format(used=len(view.refs), limit=limits.refs_max_items)
        items = "\n".join(prompts.BLOCK_REF_ITEM.format(ref=ref) for ref in view.refs)
        parts.append(f"{heading}\n{items}")
    if not parts:
        return None
    return f"{prompts.BLOCK_START}\n" + "\n\n".join(parts) + f"\n{prompts.BLOCK_END}"


class ScratchpadSection:
    name = "scratchpad"

    def static_system(self, session: SessionSnapshot) -> list[str]:
        if not scratchpad_enabled(session):
            return []
        limits = ScratchpadLimits.from_settings(session.settings)
        guidance = prompts.GUIDANCE.format(
            notes_max_chars=limits.notes_max_chars,
            plan_max_chars=limits.plan_max_chars,
            refs_max_items=limits.refs_max_items,
        )
        if any(session.setting("scratchpad", name) for name in NUDGE_SETTINGS):
            guidance += "\n" + prompts.GUIDANCE_NUDGES
        return [guidance]

    def pinned_system(self, session: SessionSnapshot) -> list[str]:
        return []

    def pinned_changed(self, session: SessionSnapshot, texts: tuple[str, ...]) -> str | None:
        return None

    def dynamic_system(self, session: SessionSnapshot) -> list[str]:
        return []

    def message_prefix(self, session: SessionSnapshot) -> list[str]:
        if not scratchpad_enabled(session):
            return []
        view = scratchpad_get(session_id=session.id)
        parts: list[str] = []
        hints = scratchpad_hints(
            session_id=session.id, epoch=session.epoch, settings=session.settings, view=view
        )
        if hints:
            parts.append("\n".join(hints))
        block = scratchpad_block_render(view=view, limits=ScratchpadLimits.from_settings(session.settings))
        if block:
            parts.append(block)
        return parts


SECTION = ScratchpadSection()
