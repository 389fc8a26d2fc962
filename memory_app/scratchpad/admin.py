"""The scratchpad in the Django admin.

The three spaces are edited on the session's admin page (`SessionScratchpadFields`, this
feature's `FeatureDashboard.admin_fields`) through `scratchpad_services.scratchpad_space_set`,
with the same optimistic concurrency as the dashboard: an edit names the version it started
from, and a space the agent changed meanwhile is refused with its current value, never
overwritten. The rows themselves and the revision trail are read-only here.
"""

from __future__ import annotations

import uuid
from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest, QueryDict

from memory_app.scratchpad import services as scratchpad_services
from memory_app.scratchpad.models import Scratchpad, ScratchpadRevision, ScratchpadSpace
from memory_app.scratchpad.selectors import scratchpad_get
from sessions_app.admin_base import ReadOnlyAdmin, SessionAdminFields

SPACES = (ScratchpadSpace.NOTES, ScratchpadSpace.PLAN, ScratchpadSpace.REFS)


class SessionScratchpadFields(SessionAdminFields):
    """The scratchpad's spaces as fields of the session's admin form (refs: one per line)."""

    scratchpad_notes = forms.CharField(
        label="Scratchpad notes",
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 6, "cols": 100}),
    )
    scratchpad_plan = forms.CharField(
        label="Scratchpad plan",
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 6, "cols": 100}),
    )
    scratchpad_refs = forms.CharField(
        label="Scratchpad refs",
        required=False,
        widget=forms.Textarea(attrs={"rows": 4, "cols": 100}),
        help_text="One ref per line.",
    )
    scratchpad_notes_version = forms.IntegerField(min_value=0, required=False, widget=forms.HiddenInput)
    scratchpad_plan_version = forms.IntegerField(min_value=0, required=False, widget=forms.HiddenInput)
    scratchpad_refs_version = forms.IntegerField(min_value=0, required=False, widget=forms.HiddenInput)

    # The spaces the operator changed, {space: value}, for `fields_save`.
    scratchpad_edits: dict[str, Any]

    def fields_load(self, session_id: uuid.UUID) -> None:
        view = scratchpad_get(session_id=session_id)
        self.fields["scratchpad_notes"].initial = view.notes
        self.fields["scratchpad_plan"].initial = view.plan
        self.fields["scratchpad_refs"].initial = "\n".join(view.refs)
        for space in SPACES:
            self.fields[f"scratchpad_{space}_version"].initial = getattr(view, f"{space}_version")

    def fields_clean(self, cleaned: dict[str, Any]) -> None:
        """Keep the spaces the operator changed; stale ones become form errors.

        Runs inside the admin's transaction with the session row locked, so what it checks still
        holds when `fields_save` writes. A new session's spaces are not edited here.
        """
        self.scratchpad_edits = {}
        if self.instance._state.adding:
            return
        session_id = self.instance.pk
        session = scratchpad_services.scratchpad_session_lock(session_id)
        limits = scratchpad_services.ScratchpadLimits.from_settings(session.settings)
        view = scratchpad_get(session_id=session_id)
        edits: dict[str, Any] = {}
        for space in SPACES:
            raw = cleaned.get(f"scratchpad_{space}")
            if raw is None:
                continue
            value: Any = [line.strip() for line in raw.replace("\r\n", "\n").split("\n") if line.strip()]
            if space != ScratchpadSpace.REFS:
                value = raw.replace("\r\n", "\n")
            if value == getattr(view, space):
                continue
            try:
                value = scratchpad_services.scratchpad_operator_value_clean(
                    space=space, value=value, limits=limits
                )
            except scratchpad_services.ScratchpadInvalidValue as exc:
                self.add_error(f"scratchpad_{space}", str(exc))
                continue
            base = cleaned.get(f"scratchpad_{space}_version") or 0
            current = getattr(view, f"{space}_version")
            if base != current:
                self._scratchpad_refuse_stale(space, current, getattr(view, space))
                continue
            edits[space] = value
        self.scratchpad_edits = edits

    def _scratchpad_refuse_stale(self, space: str, version: int, value: Any) -> None:
        data = self.data.copy() if isinstance(self.data, QueryDict) else dict(self.data)
        data[self.add_prefix(f"scratchpad_{space}_version")] = str(version)
        self.data = data
        shown = "\n".join(value) if isinstance(value, list) else value
        self.add_error(
            f"scratchpad_{space}",
            forms.ValidationError(
                "The %(space)s changed while you edited it (it is now version %(version)s), so your "
                "text was not saved. Its current value:\n%(value)s\nMerge your changes and save again.",
                code="scratchpad_conflict",
                params={"space": space, "version": version, "value": shown or "(empty)"},
            ),
        )

    def fields_save(self, session_id: uuid.UUID, author: str) -> None:
        for space, value in self.scratchpad_edits.items():
            scratchpad_services.scratchpad_space_set(
                session_id=session_id,
                space=space,
                value=value,
                author=author,
                expected_version=self.cleaned_data.get(f"scratchpad_{space}_version") or 0,
            )


@admin.register(Scratchpad)
class ScratchpadAdmin(ReadOnlyAdmin):
    list_display = ["session", "notes_version", "plan_version", "refs_version", "updated_at"]
    search_fields = ["session__id", "session__title"]
    list_select_related = ["session"]


@admin.register(ScratchpadRevision)
class ScratchpadRevisionAdmin(ReadOnlyAdmin):
    list_display = ["session", "space", "version", "author", "action", "created_at"]
    list_filter = ["space", "action"]
    search_fields = ["session__id", "author"]
    list_select_related = ["session"]

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
