"""The search index's documents in the Django admin: read-only (the services write them with
what they index). Imported by `admin.py`, which Django's autodiscovery imports."""

from __future__ import annotations

from django.contrib import admin

from sessions_app.admin_base import ReadOnlyAdmin
from sessions_app.models import RecallDocument


@admin.register(RecallDocument)
class RecallDocumentAdmin(ReadOnlyAdmin):
    list_display = ["id", "session", "epoch", "kind", "role", "at"]
    list_filter = ["kind", "role"]
    search_fields = ["session__id", "ref"]
    list_select_related = ["session"]
