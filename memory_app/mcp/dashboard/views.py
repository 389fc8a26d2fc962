"""The views that attach, change and detach an agent's MCP servers (operators only, CSRF-checked
posts), through `services.agent_mcp_server_set` / `agent_mcp_server_remove` as the operator.
Each answers with the agent page's MCP part, or the editor with what is wrong (422, nothing
stored)."""

from __future__ import annotations

import json

from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from memory_app.mcp.dashboard.forms import McpServerForm
from memory_app.mcp.dashboard.panels import TEMPLATE, servers_context
from memory_app.mcp.source import service_configs
from sessions_app import services
from sessions_app.agent_mcp_rules import McpConfigError, mcp_config_masked, mcp_server_config_clean
from sessions_app.agent_mcp_selectors import agent_mcp_servers
from sessions_app.authors import operator_author
from sessions_app.dashboard.auth import operator_required
from sessions_app.dashboard.views.agents import agent_or_404
from sessions_app.dashboard.views.common import HtmxHttpRequest, operator_name
from sessions_app.models import Agent


def _section(request: HtmxHttpRequest, agent: Agent, notice: str = "", status: int = 200) -> HttpResponse:
    if not request.htmx:
        return redirect(reverse("dashboard:agent", args=[agent.pk]) + "#agent-mcp")
    context = {"agent": agent, "notice": notice, **servers_context(agent)}
    return render(request, f"{TEMPLATE}#section", context, status=status)


@require_http_methods(["GET", "POST"])
@operator_required
def mcp_server_edit(request: HtmxHttpRequest, agent_id: int) -> HttpResponse:
    """GET: the editor (of the server `?name=`, or a new one). POST: the server saved."""
    agent = agent_or_404(agent_id)
    stored = {row.name: row for row in agent_mcp_servers(agent_id=agent.pk)}
    taken = frozenset(config.name for config in service_configs())
    editor = f"{TEMPLATE}#editor"
    if request.method == "GET":
        name = request.GET.get("name", "")
        row = stored.get(name)
        if name and row is None:
            raise Http404("No such server.")
        initial = {"name": "", "config": "", "enabled": True}
        if row is not None:
            try:
                shown = mcp_config_masked(mcp_server_config_clean(row.name, row.config))
            except McpConfigError:
                shown = {}
            initial = {"name": row.name, "config": json.dumps(shown, indent=2), "enabled": row.enabled}
        return render(request, editor, {"agent": agent, "form": McpServerForm(initial=initial)})
    name = request.POST.get("name", "")
    existing = stored.get(name)
    form = McpServerForm(request.POST, stored=existing.config if existing else None, taken=taken)
    if not form.is_valid():
        return render(request, editor, {"agent": agent, "form": form}, status=422)
    try:
        services.agent_mcp_server_set(
            agent_id=agent.pk,
            name=form.checked.name,
            config=form.checked.as_json(),
            enabled=form.cleaned_data["enabled"],
            author=operator_author(operator_name(request)),
        )
    except McpConfigError as exc:
        form.add_error(None, str(exc))
        return render(request, editor, {"agent": agent, "form": form}, status=422)
    return _section(
        request, agent, f"{form.checked.name} saved: the agent's sessions use it from their next model call."
    )


@require_POST
@operator_required
def mcp_server_remove(request: HtmxHttpRequest, agent_id: int, name: str) -> HttpResponse:
    agent = agent_or_404(agent_id)
    removed = services.agent_mcp_server_remove(
        agent_id=agent.pk, name=name, author=operator_author(operator_name(request))
    )
    if not removed:
        raise Http404("No such server.")
    return _section(request, agent, f"{name} removed: its tools are gone from the next model call.")
