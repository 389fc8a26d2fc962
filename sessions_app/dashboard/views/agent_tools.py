"""An operator's view of an agent's authored tools (DESIGN.md, "Agents"): each tool's code,
description and input schema at any version, with line diffs of the code between versions; a
restore of a version (a new version, if the tool is still at the version the page showed); and
the on/off switch, which is not a version (a tool switched off is offered to no session of the
agent from its next model call).

Writes go through the knowledge services as the operator (`operator:<username>`). A tool's code,
description and schema are written by a model: shown as escaped text, never marked safe.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe
from django_htmx.http import HttpResponseClientRedirect, reswap, retarget

from sessions_app import services
from sessions_app.agent_knowledge_rules import AgentKnowledgeError
from sessions_app.agent_knowledge_selectors import agent_tools_list
from sessions_app.authors import operator_author
from sessions_app.dashboard.agent_knowledge_forms import BaseVersionForm, ToolSwitchForm
from sessions_app.dashboard.auth import operator_required
from sessions_app.dashboard.views.agents import agent_or_404, history_page
from sessions_app.dashboard.views.common import HtmxHttpRequest, operator_name
from sessions_app.engine.features import features
from sessions_app.models import Agent, AgentPart, AgentVersion

TOOLS_SECTION = "dashboard/agent.html#tools"


def _tool_url(agent: Agent, name: str, version: int | None = None) -> str:
    url = reverse("dashboard:agent_tool", args=[agent.pk, name])
    return f"{url}?{urlencode({'version': version})}" if version is not None else url


@require_safe
@operator_required
def agent_tool(request: HtmxHttpRequest, agent_id: int, name: str) -> HttpResponse:
    """A tool as it is (or was, at `version`): its code, description and schema, every version
    and the diffs of its code. A removed tool keeps its versions here."""
    return history_page(request, agent_or_404(agent_id), AgentPart.TOOL, name)


def _refused(request: HtmxHttpRequest, agent: Agent, name: str, message: str, status: int) -> HttpResponse:
    context = {"agent": agent, "skill_name": name, "message": message}
    response = render(request, "dashboard/agent_edit.html#skill-refused", context, status=status)
    return reswap(retarget(response, "#restore-editor"), "innerHTML")


@require_POST
@operator_required
def agent_tool_restore(request: HtmxHttpRequest, agent_id: int, name: str, version: int) -> HttpResponse:
    """Version `version` of the tool defined again as a new version naming it, if the tool is
    still at the version the page showed (`base_version`, 0: removed). The rules are checked
    again (a built-in may have taken the name since)."""
    agent = agent_or_404(agent_id)
    if not AgentVersion.objects.filter(agent=agent, part=AgentPart.TOOL, name=name, version=version).exists():
        raise Http404("No such version.")
    form = BaseVersionForm(request.POST)
    if not form.is_valid():
        return _refused(request, agent, name, "The page sent no current version: reload it.", 422)
    try:
        row = services.agent_tool_restore(
            agent_id=agent.pk,
            name=name,
            version=version,
            author=operator_author(operator_name(request)),
            reserved_names=features().tool_names(),
            expected_version=form.cleaned_data["base_version"],
        )
    except AgentKnowledgeError as exc:
        return _refused(request, agent, name, f"Not restored: {exc}", 409)
    url = _tool_url(agent, name, row.version)
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


@require_POST
@operator_required
def agent_tool_switch(request: HtmxHttpRequest, agent_id: int, name: str) -> HttpResponse:
    """Switch a tool on or off for every session of the agent (from its next model call)."""
    agent = agent_or_404(agent_id)
    form = ToolSwitchForm(request.POST)
    status, notice = 200, ""
    if not form.is_valid():
        status, notice = 422, "The switch sent no state: reload the page."
    else:
        enabled = form.cleaned_data["enabled"]
        try:
            services.agent_tool_enable(
                agent_id=agent.pk, name=name, enabled=enabled, author=operator_author(operator_name(request))
            )
        except AgentKnowledgeError as exc:
            status, notice = 404, str(exc)
        else:
            state = "on" if enabled else "off"
            notice = f"{name} is {state} for every session of the agent from its next model call."
    if not request.htmx:
        return redirect(reverse("dashboard:agent", args=[agent.pk]) + "#agent-tools")
    context = {
        "agent": agent,
        "tools": agent_tools_list(agent_id=agent.pk),
        "notice": notice,
        "refused": status != 200,
    }
    return render(request, TOOLS_SECTION, context, status=status)
