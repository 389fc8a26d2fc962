"""The admin of agents (DESIGN.md, "Agents"): read through the same selectors, changed through the
same services as the protocol and the dashboard. An agent is created here by name, with its
instructions, model and settings checked as `agent.create` checks them; its instructions are
changed as a new version; everything else (versions, skills, state) is read-only here. An
agent's MCP servers are written here and on the dashboard only (operators' data: a stdio server is
a command the service runs), their env values masked.
Registered from `sessions_app.admin`."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from sessions_app import services
from sessions_app.admin_base import ReadOnlyAdmin
from sessions_app.agent_mcp_rules import MASKED, McpConfigError, mcp_config_masked, mcp_server_config_clean
from sessions_app.authors import operator_author
from sessions_app.engine import agents as engine_agents
from sessions_app.models import (
    Agent,
    AgentMcpServer,
    AgentSkill,
    AgentStateEntry,
    AgentTool,
    AgentVersion,
)
from sessions_app.validation import SpecError


class AgentForm(forms.ModelForm):
    class Meta:
        model = Agent
        fields = ["owner_name", "name", "instructions", "model", "settings"]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if self.instance.pk is None:
            # The values are checked as `agent.create` checks them, by creating the agent in
            # `save_model` (inside the admin's transaction); its errors become form errors.
            try:
                engine_agents.agent_validate(
                    name=cleaned.get("name"),
                    model=cleaned.get("model") or None,
                    settings=cleaned.get("settings"),
                )
            except SpecError as exc:
                raise forms.ValidationError(exc.message) from None
        return cleaned


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    form = AgentForm
    list_display = ["name", "owner_name", "instructions_version", "learned_version", "updated_at"]
    search_fields = ["name", "owner_name"]
    readonly_fields = ["learned", "learned_version", "instructions_version", "created_at", "updated_at"]

    def get_readonly_fields(self, request: HttpRequest, obj: Agent | None = None) -> Any:
        if obj is None:
            return self.readonly_fields
        # The owner and name identify it; model and settings are its sessions' defaults, changed
        # through the dashboard (their own versions are not kept: DESIGN.md versions the texts).
        return [*self.readonly_fields, "owner_name", "name", "model", "settings"]

    def save_model(self, request: HttpRequest, obj: Agent, form: Any, change: bool) -> None:
        author = operator_author(request.user.get_username())
        if not change:
            try:
                created = engine_agents.agent_create(
                    owner_name=obj.owner_name,
                    name=obj.name,
                    system_prompt=obj.instructions,
                    model=obj.model or None,
                    settings=obj.settings or None,
                    author=author,
                )
            except services.AgentExists as exc:
                raise forms.ValidationError(str(exc)) from None
            obj.pk = created.pk
            return
        services.agent_instructions_set(agent_id=obj.pk, instructions=obj.instructions, author=author)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # its sessions and versions hold on to it


@admin.register(AgentVersion)
class AgentVersionAdmin(ReadOnlyAdmin):
    list_display = ["agent", "part", "name", "version", "author", "created_at"]
    list_filter = ["part"]

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # the history is never edited


@admin.register(AgentSkill)
class AgentSkillAdmin(ReadOnlyAdmin):
    list_display = ["agent", "name", "description", "version", "updated_at"]
    search_fields = ["name", "description"]

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # deleting a skill writes a version (the knowledge services)


@admin.register(AgentTool)
class AgentToolAdmin(ReadOnlyAdmin):
    """An agent's authored tools as they are (their versions are the agent's versions); the
    dashboard's agent page diffs, restores and switches them."""

    list_display = ("agent", "name", "version", "enabled", "updated_at")
    list_filter = ("enabled",)
    search_fields = ("name", "description", "agent__name")


@admin.register(AgentStateEntry)
class AgentStateEntryAdmin(ReadOnlyAdmin):
    list_display = ["agent", "key", "version", "author", "updated_at"]
    search_fields = ["key"]

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class AgentMcpServerForm(forms.ModelForm):
    """An agent's MCP server, its configuration shown with env values masked; a masked value
    left as it is keeps the stored one. Checked by the rules every place shares."""

    class Meta:
        model = AgentMcpServer
        fields = ["agent", "name", "config", "enabled"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk is not None:
            try:
                shown = mcp_config_masked(mcp_server_config_clean(self.instance.name, self.instance.config))
            except McpConfigError:
                shown = {}
            self.initial["config"] = shown

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        raw = cleaned.get("config")
        if isinstance(raw, dict) and isinstance(raw.get("env"), dict) and self.instance.pk is not None:
            kept = (self.instance.config or {}).get("env") or {}
            raw["env"] = {k: (kept.get(k, "") if v == MASKED else v) for k, v in raw["env"].items()}
        try:
            name = cleaned.get("name") or self.instance.name
            cleaned["config"] = mcp_server_config_clean(name, raw).as_json()
        except McpConfigError as exc:
            raise forms.ValidationError(str(exc)) from None
        return cleaned


@admin.register(AgentMcpServer)
class AgentMcpServerAdmin(admin.ModelAdmin):
    """Written through the services as the operator (`agent_mcp_server_set` / `_remove`)."""

    form = AgentMcpServerForm
    list_display = ["agent", "name", "enabled", "author", "updated_at"]
    search_fields = ["name"]

    def get_readonly_fields(self, request: HttpRequest, obj: AgentMcpServer | None = None) -> Any:
        return ["agent", "name"] if obj is not None else []

    def save_model(self, request: HttpRequest, obj: AgentMcpServer, form: Any, change: bool) -> None:
        saved = services.agent_mcp_server_set(
            agent_id=obj.agent_id,
            name=obj.name,
            config=form.cleaned_data["config"],
            enabled=obj.enabled,
            author=operator_author(request.user.get_username()),
        )
        obj.pk = saved.pk

    def delete_model(self, request: HttpRequest, obj: AgentMcpServer) -> None:
        services.agent_mcp_server_remove(
            agent_id=obj.agent_id, name=obj.name, author=operator_author(request.user.get_username())
        )

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        for obj in queryset:
            self.delete_model(request, obj)
