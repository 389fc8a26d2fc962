"""The session notepad in the Django admin.

The session notepad is edited on the session's admin page (`SessionNotepadFields`, this
feature's `FeatureDashboard.admin_fields`) through the same service as the agent, with
optimistic concurrency; its revisions are read-only.
"""

from __future__ import annotations

import uuid
from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest, QueryDict
from django.utils.html import format_html

from memory_app.notepad import selectors, services
from memory_app.notepad.models import NotepadRevision
from sessions_app.admin_base import SessionAdminFields

CONFLICT_PRE_STYLE = "white-space: pre-wrap; max-height: 24em; overflow: auto;"


# ---------------------------------------------------------------------------
# Session notepad (seed 000)
# ---------------------------------------------------------------------------
class SessionNotepadFields(SessionAdminFields):
    """The session's notepad and the notepad version the operator started from.

    The admin runs a change form's POST in one transaction (`ModelAdmin.changeform_view`): the
    row lock taken while validating is held until the session is saved and the notepad written
    through the service, so the check and the write cannot be separated by another edit.
    """

    notepad_content = forms.CharField(
        label="Notepad",
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 16, "cols": 100}),
        help_text="The agent's session notepad, shown to the model in full on every call.",
    )
    notepad_base_version = forms.IntegerField(min_value=0, required=False, widget=forms.HiddenInput)

    notepad_edited = False

    def fields_load(self, session_id: uuid.UUID) -> None:
        state = selectors.notepad_get(session_id=session_id)
        self.fields["notepad_content"].initial = state.content
        self.fields["notepad_base_version"].initial = state.version

    def clean_notepad_content(self) -> str:
        # Browsers submit a textarea's line breaks as CRLF; the notepad keeps the agent's "\n".
        return (self.cleaned_data.get("notepad_content") or "").replace("\r\n", "\n")

    def fields_clean(self, cleaned: dict[str, Any]) -> None:
        if "notepad_content" not in cleaned:
            return
        content, base = cleaned["notepad_content"], cleaned.get("notepad_base_version") or 0
        if len(content) > services.NOTEPAD_MAX_CHARS:
            self.add_error(
                "notepad_content", f"The notepad is limited to {services.NOTEPAD_MAX_CHARS:,} characters."
            )
            return
        if self.instance._state.adding:
            # A new session's notepad is written when the operator gave it a text.
            self.notepad_edited = bool(content)
            return
        current = selectors.notepad_get(session_id=self.instance.pk, for_update=True)
        try:
            seen: str | None = selectors.notepad_at_version(session_id=self.instance.pk, version=base).content
        except NotepadRevision.DoesNotExist:
            seen = None
        # Only an edit of the text counts: saving other fields while the agent writes its
        # notepad must neither conflict nor put the old text back.
        self.notepad_edited = content != seen
        if self.notepad_edited and base != current.version:
            self._refuse_stale(current, content)

    def _refuse_stale(self, current: selectors.NotepadState, submitted: str) -> None:
        # The operator's text stays in the field; the hidden version moves to the current one, so
        # submitting again (after merging) deliberately replaces the current notepad.
        data = self.data.copy() if isinstance(self.data, QueryDict) else dict(self.data)
        data[self.add_prefix("notepad_base_version")] = str(current.version)
        self.data = data
        # Both texts keep their line breaks (an error message alone is one line in the admin),
        # escaped by format_html: the agent wrote one of them.
        message = format_html(
            "The notepad changed while you edited it (it is now version {}), so your text was not "
            "saved. Merge your changes into the field below and save again."
            '<div class="notepad-conflict" style="display: flex; gap: 12px; margin-top: 6px;">'
            '<div style="flex: 1; min-width: 0;"><strong>Current notepad (version {})</strong>'
            '<pre class="notepad-current" style="{}">{}</pre>'
            "</div>"
            '<div style="flex: 1; min-width: 0;"><strong>Your text (kept in the field)</strong>'
            '<pre class="notepad-yours" style="{}">{}</pre>'
            "</div></div>",
            current.version,
            current.version,
            CONFLICT_PRE_STYLE,
            current.content or "(empty)",
            CONFLICT_PRE_STYLE,
            submitted or "(empty)",
        )
        self.add_error("notepad_content", forms.ValidationError(message, code="notepad_conflict"))

    def fields_save(self, session_id: uuid.UUID, author: str) -> None:
        if not self.notepad_edited:
            return
        services.notepad_write(
            session_id=session_id,
            content=self.cleaned_data["notepad_content"],
            author=author,
            # Checked (under lock) in `fields_clean`: a conflict cannot happen here.
            expected_version=self.cleaned_data.get("notepad_base_version") or 0,
        )


@admin.register(NotepadRevision)
class NotepadRevisionAdmin(admin.ModelAdmin):
    list_display = ["session", "version", "author", "operation", "created_at"]
    list_filter = ["operation"]
    search_fields = ["session__id", "author"]
    list_select_related = ["session"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # The history must stay whole for the dashboard's "as it was" view.
        return False
