"""The scratchpad in the Django admin: visible, read-only (every change goes through
`scratchpad_services`, which keeps the versions, the revision trail and the events)."""

from __future__ import annotations

from django.contrib import admin

from memory_app.scratchpad_models import Scratchpad, ScratchpadRevision
from sessions_app.admin_base import ReadOnlyAdmin


@admin.register(Scratchpad)
class ScratchpadAdmin(ReadOnlyAdmin):
    list_display = ["session", "notes_version", "plan_version", "refs_version", "updated_at"]
    search_fields = ["session__id", "session__title"]


@admin.register(ScratchpadRevision)
class ScratchpadRevisionAdmin(ReadOnlyAdmin):
    list_display = ["session", "space", "version", "author", "action", "created_at"]
    list_filter = ["space", "action"]
    search_fields = ["session__id", "author"]
