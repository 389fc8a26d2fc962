"""The Django admin: everything is visible; what would break integrity is read-only."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.http import HttpRequest

from memory_app.admin import SessionNotepadAdminMixin
from sessions_app import services
from sessions_app.admin_base import ReadOnlyAdmin
from sessions_app.models import AgentSession, AgentToken, Message, ModelCall, SessionEvent, ToolCall, Turn


@admin.register(AgentToken)
class AgentTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "prefix", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["revoked_at"]
    search_fields = ["name", "prefix"]
    readonly_fields = ["prefix", "created_at", "last_used_at"]
    fields = ["name", "prefix", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        # A token is shown once at creation: `manage.py create_agent_token NAME` does that.
        return False

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request: HttpRequest, queryset: Any) -> None:
        for token in queryset:
            services.agent_token_revoke(token=token)
        self.message_user(request, "Revoked.", messages.SUCCESS)


@admin.register(AgentSession)
class AgentSessionAdmin(SessionNotepadAdminMixin, admin.ModelAdmin):
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
    list_filter = ["status", "model"]
    search_fields = ["id", "title", "model"]
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
    ]


@admin.register(Message)
class MessageAdmin(ReadOnlyAdmin):
    list_display = ["session", "position", "epoch", "role", "token_estimate", "created_at"]
    list_filter = ["role"]
    search_fields = ["session__id"]


@admin.register(SessionEvent)
class SessionEventAdmin(ReadOnlyAdmin):
    list_display = ["session", "seq", "type", "created_at"]
    list_filter = ["type"]
    search_fields = ["session__id", "type"]


@admin.register(Turn)
class TurnAdmin(ReadOnlyAdmin):
    list_display = ["id", "session", "started_at", "ended_at", "steps", "stop_reason"]
    list_filter = ["stop_reason"]


@admin.register(ToolCall)
class ToolCallAdmin(ReadOnlyAdmin):
    list_display = ["tool_use_id", "session", "name", "executor", "status", "is_error", "created_at"]
    list_filter = ["executor", "status", "is_error"]
    search_fields = ["tool_use_id", "name", "session__id"]


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
