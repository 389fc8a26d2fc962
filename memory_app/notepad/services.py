"""Every change of the agent's working memory.

Rules that hold for every service here (as in `sessions_app.services`): a change, its history row
and the `SessionEvent` announcing it are written in one transaction; the event reaches watchers
only after commit.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from memory_app.notepad.models import NotepadOperation, NotepadRevision
from memory_app.notepad.settings import NOTEPAD_MAX_CHARS, notepad_history_max_chars
from sessions_app.common.text_edits import TextEdit, TextEditError, TextSubject, text_edit_apply
from sessions_app.models import AgentSession
from sessions_app.services import event_emit

# ---------------------------------------------------------------------------
# Session notepad (seed 000)
# ---------------------------------------------------------------------------
__all__ = [
    "NOTEPAD_MAX_CHARS",
    "NotepadBurst",
    "NotepadConflict",
    "NotepadEdit",
    "NotepadEditError",
    "notepad_burst_announce",
    "notepad_edit_apply",
    "notepad_update",
    "notepad_write",
]
# The edit itself is seed 000's text operation, shared with `edit_system_prompt`.
NotepadEdit = TextEdit
NOTEPAD_SUBJECT = TextSubject(
    name="the notepad",
    where_current="the notepad's current text is in your context, or call read_notepad.",
)


class NotepadEditError(TextEditError):
    """An edit that cannot apply (text not found, a field missing, too long): nothing changed.

    The message is written for whoever made the edit, the model included, to act on.
    """


class NotepadConflict(Exception):
    """The notepad changed since the version the edit started from; nothing was overwritten.

    Carries the current content and version so the editor can merge and try again.
    """

    def __init__(self, *, content: str, version: int) -> None:
        super().__init__(f"the notepad is at version {version}")
        self.content = content
        self.version = version


@dataclass
class NotepadBurst:
    """A burst of edits by one author (one `run_sandbox_code` run) that share one revision and one
    `notepad.updated` event.

    Each edit of a burst applies to the notepad at once, as any edit (a new version, under the
    row lock, so later reads see it and an operator's stale edit still conflicts), but instead of
    a revision and an event each: the burst's revision row moves to its latest version, and
    `notepad_burst_announce` sends one event when the burst ends. Another author's change in
    between starts the burst a new row, so every version someone else saw keeps its text. Owned
    by one run, used by one call at a time.
    """

    author: str
    revision_id: int | None = None
    version: int = 0  # the version the burst's latest edit made (0: none yet)
    operation: str = ""
    unannounced: bool = False


def notepad_edit_apply(*, text: str, edit: NotepadEdit) -> str:
    """The notepad after `edit`; raises `NotepadEditError` if the edit cannot apply (the rules
    of each operation: `sessions_app.common.text_edits.text_edit_apply`)."""
    try:
        return text_edit_apply(text=text, edit=edit, subject=NOTEPAD_SUBJECT)
    except TextEditError as exc:
        raise NotepadEditError(str(exc)) from None


def _notepad_history_prune(*, session_id: uuid.UUID, max_chars: int) -> int:
    """Drop the text of the session's oldest revisions while their text is over `max_chars`
    (`settings.notepad.history_max_chars`); the newest revision always keeps its text. The rows
    stay (who changed it, when), marked `pruned`. Returns how many were pruned."""
    kept = NotepadRevision.objects.filter(session_id=session_id, pruned=False)
    if (kept.aggregate(total=Sum("chars"))["total"] or 0) <= max_chars:
        return 0
    total, doomed = 0, []
    for index, (pk, chars) in enumerate(kept.order_by("-version").values_list("pk", "chars")):
        total += chars
        if total > max_chars and index > 0:
            doomed.append(pk)
    NotepadRevision.objects.filter(pk__in=doomed).update(content="", chars=0, pruned=True)
    return len(doomed)


def _notepad_change(
    *,
    session_id: uuid.UUID,
    author: str,
    operation: str,
    expected_version: int | None,
    change: Callable[[str], str],
    burst: NotepadBurst | None = None,
    tool_use_id: str | None = None,
) -> NotepadRevision:
    with transaction.atomic():
        # The row lock serializes every notepad change of the session (agent and operators alike):
        # each change applies to the content the previous one left, so none is lost. (SQLite has
        # no row locks; its IMMEDIATE transactions serialize writers the same way.)
        session = (
            AgentSession.objects.select_for_update()
            .only("id", "notepad", "notepad_version", "settings")
            .get(pk=session_id)
        )
        current = session.notepad or ""
        if expected_version is not None and expected_version != session.notepad_version:
            raise NotepadConflict(content=current, version=session.notepad_version)
        content = change(current)
        if len(content) > NOTEPAD_MAX_CHARS:
            raise NotepadEditError(
                f"The notepad would be {len(content):,} characters, over its limit of "
                f"{NOTEPAD_MAX_CHARS:,} (NOTEPAD_MAX_CHARS), so nothing was changed. Condense it "
                "(write_notepad with a shorter version) or delete notes that are no longer needed."
            )
        version = session.notepad_version + 1
        AgentSession.objects.filter(pk=session_id).update(notepad=content, notepad_version=version)
        fields = {
            "version": version,
            "author": author,
            "content": content,
            "chars": len(content),
            "created_at": timezone.now(),
        }
        if burst is not None and burst.revision_id is not None and burst.version == session.notepad_version:
            # The burst's own row still holds the current version: it moves on with the burst.
            fields["operation"] = operation if operation == burst.operation else NotepadOperation.WRITE
            NotepadRevision.objects.filter(pk=burst.revision_id).update(**fields)
            revision = NotepadRevision(pk=burst.revision_id, session_id=session_id, **fields)
        else:
            revision = NotepadRevision.objects.create(session_id=session_id, operation=operation, **fields)
        _notepad_history_prune(session_id=session_id, max_chars=notepad_history_max_chars(session.settings))
        if burst is None:
            payload: dict[str, Any] = {"content": content, "version": version, "author": author}
            if tool_use_id is not None:
                # An edit made during a tool call (an authored tool's progress note): the call,
                # and what it added when it added at the end (an append), so that a watcher
                # can list the notes as they arrive without keeping the previous content.
                payload["tool_use_id"] = tool_use_id
                if content.startswith(current) and len(content) > len(current):
                    payload["note"] = content[len(current) :]
            event_emit(session_id=session_id, type="notepad.updated", payload=payload)
    if burst is not None:
        # Only after the block succeeded: a refused edit leaves the burst as it was.
        burst.revision_id, burst.version, burst.operation = revision.pk, version, revision.operation
        burst.unannounced = True
    return revision


def notepad_burst_announce(*, session_id: uuid.UUID, burst: NotepadBurst) -> bool:
    """End a burst: one `notepad.updated` event (the current content, version and the burst's
    author) if the burst changed the notepad and nobody changed it since (else that later change
    announced a newer text already). Returns whether an event was sent. Safe to call twice."""
    if not burst.unannounced:
        return False
    with transaction.atomic():
        row = (
            AgentSession.objects.select_for_update()
            .filter(pk=session_id)
            .values("notepad", "notepad_version")
            .first()
        )
        latest = row is not None and row["notepad_version"] == burst.version
        if latest:
            assert row is not None
            event_emit(
                session_id=session_id,
                type="notepad.updated",
                payload={"content": row["notepad"] or "", "version": burst.version, "author": burst.author},
            )
    burst.unannounced = False
    return latest


def notepad_write(
    *,
    session_id: uuid.UUID,
    content: str,
    author: str,
    expected_version: int | None = None,
    burst: NotepadBurst | None = None,
    tool_use_id: str | None = None,
) -> NotepadRevision:
    """Replace the whole notepad (`write_notepad`; "" clears it). Returns the new revision.

    With `expected_version` (an operator's edit names the version it started from) a notepad that
    has moved on raises `NotepadConflict` with the current content; without it (the agent) the
    write applies to whatever is there. Raises `NotepadEditError` past `NOTEPAD_MAX_CHARS`.
    Every successful call is one new version, one revision and one `notepad.updated` event; in a
    `burst`, the burst's one revision and, when it ends, its one event (`NotepadBurst`). The
    session's revisions keep at most `settings.notepad.history_max_chars` of text. `tool_use_id`:
    the tool call the edit is made in, carried by its event (an authored tool's progress note).
    """
    return _notepad_change(
        session_id=session_id,
        author=author,
        operation=NotepadOperation.WRITE,
        expected_version=expected_version,
        change=lambda current: content,
        burst=burst,
        tool_use_id=tool_use_id,
    )


def notepad_update(
    *,
    session_id: uuid.UUID,
    operation: str,
    author: str,
    content: str | None = None,
    find: str | None = None,
    replace: str | None = None,
    replace_all: bool = False,
    expected_version: int | None = None,
    burst: NotepadBurst | None = None,
    tool_use_id: str | None = None,
) -> NotepadRevision:
    """Apply one targeted edit (`update_notepad`) to the current notepad; see `notepad_edit_apply`.

    The edit is applied under the session's row lock to the content as it is then, so concurrent
    edits queue and none is lost. Raises `NotepadEditError` (nothing changed) and, with a stale
    `expected_version`, `NotepadConflict`. Returns the new revision (in a `burst`, as
    `notepad_write`; `tool_use_id` as there).
    """
    edit = NotepadEdit(
        operation=operation, content=content, find=find, replace=replace, replace_all=replace_all
    )
    return _notepad_change(
        session_id=session_id,
        author=author,
        operation=operation,
        expected_version=expected_version,
        change=lambda current: notepad_edit_apply(text=current, edit=edit),
        burst=burst,
        tool_use_id=tool_use_id,
    )
