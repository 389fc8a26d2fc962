"""The Django admin: everything is visible; what would break integrity is read-only."""

from __future__ import annotations

import json
import weakref
from functools import lru_cache
from typing import Any, cast

from django import forms
from django.contrib import admin, messages
from django.db import transaction
from django.forms.models import ModelFormMetaclass
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.cache import add_never_cache_headers
from django.utils.module_loading import import_string

from sessions_app import (
    admin_agents,  # noqa: F401  (registers the agents' admins)
    admin_recall,  # noqa: F401  (registers the search documents' admin)
    services,
    tokens,
)
from sessions_app.admin_base import ReadOnlyAdmin, SessionAdminFields
from sessions_app.authors import operator_author
from sessions_app.engine import sessions as engine_sessions
from sessions_app.engine.features import FeatureSet, features
from sessions_app.message_content import messages_with_content, resolved
from sessions_app.models import (
    AgentSession,
    AgentToken,
    Archive,
    MaskedResult,
    Message,
    ModelCall,
    RequestPart,
    SessionEvent,
    ToolCall,
    Turn,
)
from sessions_app.validation import SpecError, client_tools_clean, settings_clean

PREVIEW_CHARS = 120
SESSION_BUSY = (
    "A turn is running in this session or one of its sub-sessions: cancel it (or wait for it to "
    "end), then delete the session."
)


@admin.register(AgentToken)
class AgentTokenAdmin(admin.ModelAdmin):
    """Tokens are made here or by `manage.py create_agent_token NAME`: the raw token is shown
    once, on the page that answers the add, and only its hash is stored."""

    list_display = ["name", "prefix", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["revoked_at"]
    search_fields = ["name", "prefix"]
    readonly_fields = ["prefix", "created_at", "last_used_at"]
    fields = ["name", "prefix", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The raw token of an add, from save_model to response_add of the same request only.
        self._raw_tokens: weakref.WeakKeyDictionary[HttpRequest, str] = weakref.WeakKeyDictionary()

    def get_fields(self, request: HttpRequest, obj: AgentToken | None = None) -> Any:
        return ["name"] if obj is None else self.fields

    def get_readonly_fields(self, request: HttpRequest, obj: AgentToken | None = None) -> Any:
        return [] if obj is None else self.readonly_fields

    def save_model(self, request: HttpRequest, obj: AgentToken, form: Any, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        token, raw = services.agent_token_create(name=obj.name)
        # The admin goes on with `obj` (its log entry, its response): make it the stored row.
        obj.pk = token.pk
        obj.refresh_from_db()
        obj._state.adding = False
        self._raw_tokens[request] = raw

    def response_add(
        self, request: HttpRequest, obj: AgentToken, post_url_continue: str | None = None
    ) -> Any:
        raw = self._raw_tokens.pop(request, None)
        if raw is None:
            return super().response_add(request, obj, post_url_continue)
        # Rendered in the answer to the POST (no redirect, no message stored in the session):
        # the raw token exists only in this response.
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "Agent token created",
            "token": obj,
            "raw_token": raw,
        }
        response = TemplateResponse(request, "admin/sessions_app/agenttoken/created.html", context)
        add_never_cache_headers(response)
        return response

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request: HttpRequest, queryset: Any) -> None:
        # Their open connections, in every server process, close with 4401 within seconds.
        revoked = tokens.agent_tokens_revoke(tokens=queryset)
        self.message_user(request, f"Revoked {revoked} token(s).", messages.SUCCESS)


class AgentSessionForm(forms.ModelForm):
    """The session, with settings and tools validated as the protocol validates them (an invalid
    object would otherwise reach the engine), and each feature's fields (`session_form_class`)."""

    # The features' fields classes this form is made of, in feature order.
    field_parts: tuple[type[SessionAdminFields], ...] = ()

    class Meta:
        model = AgentSession
        fields = "__all__"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not self.instance._state.adding:
            for part in self.field_parts:
                part.fields_load(self._as_fields, self.instance.pk)

    @property
    def _as_fields(self) -> SessionAdminFields:
        # The form's class has each of `field_parts` among its bases (`session_form_class`).
        return cast(SessionAdminFields, self)

    def clean_settings(self) -> dict:
        try:
            return settings_clean(self.cleaned_data.get("settings") or {}, schema=features().settings_schema)
        except SpecError as exc:
            raise forms.ValidationError(exc.message) from exc

    def clean_client_tools(self) -> list:
        try:
            return client_tools_clean(
                self.cleaned_data.get("client_tools") or [], reserved_names=features().tool_names()
            )
        except SpecError as exc:
            raise forms.ValidationError(exc.message) from exc

    def clean(self) -> dict[str, Any] | None:
        cleaned = super().clean()
        if cleaned is not None:
            for part in self.field_parts:
                part.fields_clean(self._as_fields, cleaned)
        return cleaned

    def features_save(self, author: str) -> None:
        """Write each feature's fields through its services (after the session's row is saved)."""
        for part in self.field_parts:
            part.fields_save(self._as_fields, self.instance.pk, author)


@lru_cache(maxsize=1)
def session_form_class(feature_set: FeatureSet) -> type[AgentSessionForm]:
    """The session's admin form for these features: `AgentSessionForm` and each feature's
    `FeatureDashboard.admin_fields` class (their fields come after the session's own)."""
    parts = tuple(import_string(path) for path in feature_set.admin_fields)
    for part in parts:
        if not issubclass(part, SessionAdminFields):
            raise TypeError(f"{part.__module__}.{part.__qualname__} is not a SessionAdminFields")
    namespace = {"field_parts": parts, "__module__": __name__}
    form_class = ModelFormMetaclass("AgentSessionForm", (AgentSessionForm, *parts), namespace)
    return cast(type[AgentSessionForm], form_class)


class SessionRowAdmin(admin.ModelAdmin):
    """Saves only the fields the operator changed.

    The admin loads the session before the form locks it, and a running turn keeps writing the
    row (seq and position counters, lease, notepad, epoch): saving the whole row would put stale
    values back and break every later write.
    """

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        if not change:
            obj.save()
            return
        editable = {field.name for field in obj._meta.concrete_fields if field.editable}
        changed = [name for name in form.changed_data if name in editable]
        if changed:
            obj.save(update_fields=changed)


@admin.register(AgentSession)
class AgentSessionAdmin(SessionRowAdmin):
    form = AgentSessionForm
    list_display = [
        "__str__",
        "owner",
        "model",
        "status",
        "epoch",
        "last_prompt_tokens",
        "context_window",
        "last_activity_at",
    ]
    list_filter = ["status", "model", "depth", "created_at"]
    search_fields = ["id", "title", "model", "owner__name"]
    list_select_related = ["owner"]
    readonly_fields = [
        "id",
        "owner",
        "epoch",
        "last_seq",
        "next_position",
        "last_prompt_tokens",
        "current_turn_id",
        "lease_expires_at",
        "status",
        "created_at",
        "last_activity_at",
        # Sub-sessions (seed 000): set once, when the child is spawned or forked.
        "parent_session",
        "root_session",
        "depth",
        "spawn_mode",
        "spawned_by_tool_use_id",
    ]

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        # The features' fields, as `PALIMPSEST_FEATURES` names them now (a test may change it).
        kwargs["form"] = session_form_class(features())
        return super().get_form(request, obj, change, **kwargs)

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        form.features_save(operator_author(request.user.get_username()))

    # -- deletion: through `engine.sessions.session_delete`, as the dashboard's Delete --------
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The delete requests refused because a turn runs, from delete_model to response_delete.
        self._refused: weakref.WeakSet[HttpRequest] = weakref.WeakSet()

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> Any:
        """What the confirmation page lists. The rows a session holds go with it whatever their
        own admin allows: those admins refuse deleting one revision or one archive on its own
        (it would break the history), not the deletion of the session that holds them (issue 30
        item 14: a superuser was told "no permission to delete notepad revision"). Who may
        delete the session may delete them with it."""
        to_delete, model_count, perms_needed, protected = super().get_deleted_objects(objs, request)
        if self.has_delete_permission(request):
            perms_needed = set()
        return to_delete, model_count, perms_needed, protected

    def delete_model(self, request: HttpRequest, obj: AgentSession) -> None:
        try:
            engine_sessions.session_delete(session_id=obj.pk)
        except services.TurnInProgress:
            # The admin's delete view runs in one transaction: its log entry goes too.
            transaction.set_rollback(True)
            self._refused.add(request)

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        refused = []
        for session_id in list(queryset.values_list("pk", flat=True)):
            try:
                engine_sessions.session_delete(session_id=session_id)
            except AgentSession.DoesNotExist:
                pass  # a sub-session of one deleted before it
            except services.TurnInProgress:
                refused.append(str(session_id))
        if refused:
            self.message_user(request, f"{SESSION_BUSY} Not deleted: {', '.join(refused)}.", messages.ERROR)

    def response_delete(self, request: HttpRequest, obj_display: str, obj_id: Any) -> HttpResponse:
        if request in self._refused:
            self._refused.discard(request)
            self.message_user(request, SESSION_BUSY, messages.ERROR)
            return HttpResponseRedirect(reverse("admin:sessions_app_agentsession_change", args=[obj_id]))
        return super().response_delete(request, obj_display, obj_id)


@admin.register(Message)
class MessageAdmin(ReadOnlyAdmin):
    list_display = ["session", "position", "epoch", "role", "preview", "token_estimate", "created_at"]
    list_filter = ["role", "epoch"]
    search_fields = ["session__id"]
    list_select_related = ["session"]
    # The row's own column is null for a message that shares its content (a fork's copy): the
    # page shows the content resolved instead, and the row it is shared from.
    exclude = ["content"]
    readonly_fields = ["content_shown", "shared_from"]

    def get_queryset(self, request: HttpRequest) -> Any:
        return messages_with_content(super().get_queryset(request))

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # A message goes only with its session: alone it would leave a hole in the history, and
        # a fork's copies may share its content.
        return False

    @admin.display(description="content")
    def content_shown(self, obj: Message) -> str:
        return json.dumps(resolved(obj), ensure_ascii=False, indent=1)

    @admin.display(description="content shared from")
    def shared_from(self, obj: Message) -> str:
        # The holder's session and position, not the holder itself (its content is megabytes).
        if obj.content_source_id is None:
            return "-"
        session_id, position = Message.objects.values_list("session_id", "position").get(
            pk=obj.content_source_id
        )
        return f"session {session_id}, position {position}"

    @admin.display(description="content")
    def preview(self, obj: Message) -> str:
        parts = [
            b.get("text") or f"[{b.get('type')}{' ' + b['name'] if b.get('name') else ''}]"
            for b in resolved(obj)
            if isinstance(b, dict)
        ]
        text = " ".join(p for p in parts if p)
        return text if len(text) <= PREVIEW_CHARS else text[:PREVIEW_CHARS] + "…"


@admin.register(SessionEvent)
class SessionEventAdmin(ReadOnlyAdmin):
    list_display = ["session", "seq", "type", "created_at"]
    list_filter = ["type"]
    search_fields = ["session__id", "type"]
    list_select_related = ["session"]


@admin.register(Turn)
class TurnAdmin(ReadOnlyAdmin):
    list_display = ["id", "session", "started_at", "ended_at", "steps", "stop_reason"]
    list_filter = ["stop_reason"]
    search_fields = ["id", "session__id"]
    list_select_related = ["session"]


@admin.register(ToolCall)
class ToolCallAdmin(ReadOnlyAdmin):
    list_display = ["tool_use_id", "session", "name", "executor", "status", "is_error", "created_at"]
    list_filter = ["executor", "status", "is_error", "name"]
    search_fields = ["tool_use_id", "name", "session__id"]
    list_select_related = ["session"]


@admin.register(ModelCall)
class ModelCallAdmin(ReadOnlyAdmin):
    list_display = [
        "session",
        "step",
        "purpose",
        "model",
        "input_tokens",
        "cache_read_input_tokens",
        "cache_creation_input_tokens",
        "output_tokens",
        "duration_ms",
        "started_at",
    ]
    list_filter = ["purpose", "provider", "model"]
    search_fields = ["session__id"]
    list_select_related = ["session"]


@admin.register(RequestPart)
class RequestPartAdmin(ReadOnlyAdmin):
    """The parts of requests stored once (the tools), which call records name by hash."""

    list_display = ["sha256", "created_at"]
    search_fields = ["sha256"]


@admin.register(Archive)
class ArchiveAdmin(ReadOnlyAdmin):
    list_display = [
        "session",
        "epoch",
        "trigger",
        "message_count",
        "kept_messages",
        "tokens_before",
        "tokens_after",
        "duration_ms",
        "created_at",
    ]
    search_fields = ["session__id", "summary"]
    list_select_related = ["session"]

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # An archive is the only way back to what compaction summarized.
        return False


@admin.register(MaskedResult)
class MaskedResultAdmin(ReadOnlyAdmin):
    """Tool results that requests show as a placeholder (compaction's cheap tier)."""

    list_display = ["session", "epoch", "tool_use_id", "observation_id", "size_chars", "created_at"]
    search_fields = ["session__id", "tool_use_id", "observation_id"]
    list_select_related = ["session"]
