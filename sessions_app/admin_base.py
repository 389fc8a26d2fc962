"""Admin building blocks shared by the apps (kept apart from admin.py to avoid import cycles)."""

from __future__ import annotations

import uuid
from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest


class ReadOnlyAdmin(admin.ModelAdmin):
    """For rows whose edit would break integrity (events, messages, archives, revisions)."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class SessionAdminFields(forms.Form):
    """A feature's fields on the session's admin page (`FeatureDashboard.admin_fields`), such as a
    memory's text, written through the feature's own services.

    `sessions_app.admin` builds the session's form from its own `ModelForm` and every feature's
    fields class, in feature order: a subclass is a mixin of that form, so `self.instance` is the
    session (not saved yet when it is added) and `self.data`, `self.add_error` are the whole
    form's. The admin calls each feature's hooks in turn:

    - `fields_load(session_id)`: the fields' initial values, for a session that exists;
    - `fields_clean(cleaned)`: check what the operator changed and keep what is to be written
      (errors go to `add_error`). It runs inside the admin's transaction: a row lock it takes holds
      until `fields_save`, so what it checked still holds then;
    - `fields_save(session_id, author)`: write what `fields_clean` kept, after the session's row is
      saved (`author`: the operator, as `sessions_app.authors.operator_author` names them).
    """

    instance: Any

    def fields_load(self, session_id: uuid.UUID) -> None:
        """Nothing to load."""

    def fields_clean(self, cleaned: dict[str, Any]) -> None:
        """Nothing to check."""

    def fields_save(self, session_id: uuid.UUID, author: str) -> None:
        """Nothing to write."""
