"""The Agents section (DESIGN.md, "Agents"): the list and a new agent, one agent's page (its
instructions, editable as a new version; its learned text, skills, state and sessions), the
history of its instructions and learned text (diffs, restore) and each skill's versions.

Writes go through `engine.agents.agent_create` and the agent services, with the version the
operator saw as their `expected_version` (the conflict rule); reads through `selectors`. The
editors of the learned text and state are in `agent_knowledge`, the skills' in `agent_skills`.
The learned text and the skills are written by a model: they are shown as sanitized markdown or
escaped text, never marked safe.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST, require_safe
from django_htmx.http import HttpResponseClientRedirect, reswap, retarget

from sessions_app import services
from sessions_app.agent_knowledge_selectors import agent_tools_list
from sessions_app.authors import operator_author
from sessions_app.dashboard import selectors
from sessions_app.dashboard.agent_forms import (
    AgentCreateForm,
    AgentListForm,
    InstructionsForm,
    StateQueryForm,
)
from sessions_app.dashboard.auth import operator_required
from sessions_app.dashboard.history_forms import HistoryQueryForm, RestoreForm
from sessions_app.dashboard.panels import agent_panels
from sessions_app.dashboard.views.common import HtmxHttpRequest, operator_name
from sessions_app.engine import agents as engine_agents
from sessions_app.models import Agent, AgentPart, AgentSkill, AgentTool
from sessions_app.validation import SpecError

HISTORY_TEMPLATE = "dashboard/agent_history.html"
# The latest versions the agent page lists under its instructions and its learned text.
VERSIONS_SHOWN = 5


def agent_or_404(agent_id: Any) -> Agent:
    try:
        return selectors.agent_get_for_operator(agent_id=agent_id)
    except selectors.NotFound:
        raise Http404("No such agent.") from None


# ---------------------------------------------------------------------------
# The list and a new agent
# ---------------------------------------------------------------------------
@require_safe
@operator_required
def agent_list(request: HtmxHttpRequest) -> HttpResponse:
    form = AgentListForm(request.GET)
    page = (form.cleaned_data.get("page") or 1) if form.is_valid() else 1
    agents, has_next = selectors.agent_list_page(page=page)
    context = {
        "agents": agents,
        "page": page,
        "has_next": has_next,
        "list_errors": [] if form.is_valid() else ["page must be a whole number, 1 or more."],
        "create_form": AgentCreateForm(),
        "operators_owner": selectors.OPERATORS_OWNER,
    }
    return render(request, "dashboard/agent_list.html", context, status=200 if form.is_valid() else 400)


@require_POST
@operator_required
def agent_create(request: HtmxHttpRequest) -> HttpResponse:
    """A new agent of the operators (`engine.agents.agent_create`, as a client's `agent.create`
    checks it), then its page. A bad value is shown on its field (status 422), nothing created."""
    form = AgentCreateForm(request.POST)
    if form.is_valid():
        try:
            agent = engine_agents.agent_create(
                owner_name="", author=operator_author(operator_name(request)), **form.agent_fields()
            )
        except SpecError as exc:
            form.add_spec_error(exc)
        except services.AgentExists:
            form.add_error("name", "The operators have an agent of that name already.")
        else:
            url = reverse("dashboard:agent", args=[agent.pk])
            return HttpResponseClientRedirect(url) if request.htmx else redirect(url)
    return render(request, "dashboard/agent_list.html#create-form", {"create_form": form}, status=422)


# ---------------------------------------------------------------------------
# One agent
# ---------------------------------------------------------------------------
def state_context(request: HtmxHttpRequest, agent: Agent) -> tuple[dict[str, Any], bool]:
    form = StateQueryForm(request.GET)
    valid = form.is_valid()
    prefix = form.cleaned_data.get("key_prefix", "") if valid else ""
    after = form.cleaned_data.get("after", "") if valid else ""
    state = selectors.agent_state_page(agent=agent, prefix=prefix, after=after)
    next_query = urlencode({"key_prefix": prefix, "after": state.next_after}) if state.next_after else ""
    return {
        "state": state,
        "state_errors": [] if valid else ["key_prefix and after are at most 200 characters."],
        "state_next_query": next_query,
    }, valid


@require_safe
@operator_required
def agent_detail(request: HtmxHttpRequest, agent_id: int) -> HttpResponse:
    agent = agent_or_404(agent_id)
    state, valid = state_context(request, agent)
    status = 200 if valid else 400
    if request.htmx and request.htmx.target == "agent-state":
        return render(request, "dashboard/agent.html#state", {"agent": agent, **state}, status=status)
    sessions, session_total = selectors.agent_sessions(agent=agent)
    context = {
        "agent": agent,
        "owner": agent.owner_name or selectors.OPERATORS_OWNER,
        "instructions_versions": selectors.agent_versions_latest(
            agent=agent, part=AgentPart.INSTRUCTIONS, limit=VERSIONS_SHOWN
        ),
        "learned_versions": selectors.agent_versions_latest(
            agent=agent, part=AgentPart.LEARNED, limit=VERSIONS_SHOWN
        ),
        "skills": selectors.agent_skills(agent=agent),
        "tools": agent_tools_list(agent_id=agent.pk),
        "sessions": sessions,
        "session_total": session_total,
        "feature_panels": agent_panels(agent, request),
        **state,
    }
    return render(request, "dashboard/agent.html", context, status=status)


@require_http_methods(["GET", "POST"])
@operator_required
def agent_instructions_edit(request: HtmxHttpRequest, agent_id: int) -> HttpResponse:
    """GET: the editor, from the current version. POST: the text saved as a new version, if the
    instructions are still at the version the editor opened at; otherwise nothing is overwritten
    and the editor comes back with both texts, its base moved to the current version."""
    agent = agent_or_404(agent_id)
    template = "dashboard/agent.html#instructions-editor"
    if request.method == "GET":
        form = InstructionsForm(
            initial={"instructions": agent.instructions, "base_version": agent.instructions_version}
        )
        return render(request, template, {"agent": agent, "form": form})
    form = InstructionsForm(request.POST)
    if not form.is_valid():
        return _in_editor(render(request, template, {"agent": agent, "form": form}, status=422))
    text = form.cleaned_data["instructions"]
    try:
        saved = services.agent_instructions_set(
            agent_id=agent.pk,
            instructions=text,
            expected_version=form.cleaned_data["base_version"],
            author=operator_author(operator_name(request)),
        )
    except services.AgentTextConflict as changed:
        context = {
            "agent": agent,
            "form": InstructionsForm(initial={"instructions": text, "base_version": changed.version}),
            "conflict": True,
            "conflict_version": changed.version,
            "conflict_text": changed.text,
        }
        return _in_editor(render(request, template, context, status=409))
    if not request.htmx:
        return redirect(reverse("dashboard:agent", args=[agent.pk]))
    unchanged = saved.instructions_version == form.cleaned_data["base_version"]
    context = {
        "agent": saved,
        "instructions_versions": selectors.agent_versions_latest(
            agent=saved, part=AgentPart.INSTRUCTIONS, limit=VERSIONS_SHOWN
        ),
        "notice": (
            "No change: the instructions already read so."
            if unchanged
            else f"Saved as version {saved.instructions_version}: new sessions start from it, running "
            "ones at their next compaction."
        ),
    }
    return render(request, "dashboard/agent.html#instructions", context)


def _in_editor(response: HttpResponse) -> HttpResponse:
    """A refused save: the editor comes back into its slot, the instructions shown stay."""
    return reswap(retarget(response, "#instructions-editor"), "innerHTML")


# ---------------------------------------------------------------------------
# Histories: the instructions and the learned text (restore), a skill (read)
# ---------------------------------------------------------------------------
def _text_part(part: str) -> str:
    if part not in selectors.TEXT_PARTS:
        raise Http404("No such part of an agent.")
    return part


def _history_context(agent: Agent, part: str, name: str, found: selectors.PartHistory) -> dict[str, Any]:
    history = found.history
    selected_deleted = found.selected_row is not None and found.selected_row.deleted
    restorable = not history.is_current and history.selected_version > 0 and not selected_deleted
    if part in selectors.TEXT_PARTS:
        restore_base = history.current_version
        restore_url = reverse("dashboard:agent_restore", args=[agent.pk, part, history.selected_version])
    else:
        # A skill's or tool's current version is its row's (0: deleted now; its last version is
        # the deletion).
        model = AgentTool if part == AgentPart.TOOL else AgentSkill
        row = model.objects.filter(agent=agent, name=name).only("version").first()
        restore_base = row.version if row is not None else 0
        route = "dashboard:agent_tool_restore" if part == AgentPart.TOOL else "dashboard:agent_skill_restore"
        restore_url = reverse(route, args=[agent.pk, name, history.selected_version])
    return {
        "agent": agent,
        "part": part,
        "what": selectors.TEXT_PARTS.get(part, f"{'tool' if part == AgentPart.TOOL else 'skill'} {name}"),
        "skill_name": name if part == AgentPart.SKILL else "",
        "tool_name": name if part == AgentPart.TOOL else "",
        "tool_row": AgentTool.objects.filter(agent=agent, name=name).first()
        if part == AgentPart.TOOL
        else None,
        "found": found,
        "history": history,
        # Version 0 is a state of the learned text only (empty, before the model first wrote it).
        "show_zero": part == AgentPart.LEARNED,
        "restore_url": restore_url if restorable else "",
        "restore_base": restore_base,
        "older_query": urlencode(
            {"version": history.selected_version, "against": history.against, "before": history.older_before}
        ),
    }


def history_page(request: HtmxHttpRequest, agent: Agent, part: str, name: str = "") -> HttpResponse:
    """The history page of a part of the agent: its instructions, learned text, a skill or an
    authored tool (`name`)."""
    form = HistoryQueryForm(request.GET)
    base = {
        "agent": agent,
        "part": part,
        "skill_name": name if part == AgentPart.SKILL else "",
        "tool_name": name if part == AgentPart.TOOL else "",
        "what": selectors.TEXT_PARTS.get(part, name),
    }
    if not form.is_valid():
        return render(request, HISTORY_TEMPLATE, {**base, "query_errors": form.error_lines()}, status=400)
    try:
        found = selectors.agent_part_history(agent=agent, part=part, name=name, **form.query())
    except selectors.NotFound:
        raise Http404("No such version.") from None
    return render(request, HISTORY_TEMPLATE, _history_context(agent, part, name, found))


@require_safe
@operator_required
def agent_history(request: HtmxHttpRequest, agent_id: int, part: str) -> HttpResponse:
    return history_page(request, agent_or_404(agent_id), _text_part(part))


@require_safe
@operator_required
def agent_skill(request: HtmxHttpRequest, agent_id: int, name: str) -> HttpResponse:
    """A skill as it is (or was, at `version`), rendered as sanitized markdown, with every
    version and their diffs. A deleted skill keeps its versions here."""
    return history_page(request, agent_or_404(agent_id), AgentPart.SKILL, name)


@require_POST
@operator_required
def agent_restore(request: HtmxHttpRequest, agent_id: int, part: str, version: int) -> HttpResponse:
    """Restore version `version` of the instructions or the learned text as a new version naming
    it (`services.agent_version_restore`), if the part is still at the version the page showed
    (`base_version`). Otherwise nothing changes and the page says what happened meanwhile."""
    agent = agent_or_404(agent_id)
    part = _text_part(part)
    form = RestoreForm(request.POST)
    if not form.is_valid():
        return _restore_refused(request, agent, part, "The page sent no current version: reload it.", 422)
    base = form.cleaned_data["base_version"]
    if base == version:
        return _restore_refused(
            request, agent, part, f"Version {version} is the current text: there is nothing to restore.", 422
        )
    try:
        saved = services.agent_version_restore(
            agent_id=agent.pk,
            part=part,
            version=version,
            expected_version=base,
            author=operator_author(operator_name(request)),
        )
    except services.AgentTextConflict as changed:
        what = selectors.TEXT_PARTS[part]
        message = (
            f"Not restored: the {what} changed since this page was loaded (it is now version "
            f"{changed.version}). Nothing was overwritten; look at the new version, then restore again."
        )
        return _restore_refused(request, agent, part, message, 409, latest=changed.version)
    except services.AgentVersionNotFound:
        raise Http404("No such version.") from None
    new_version = saved.instructions_version if part == AgentPart.INSTRUCTIONS else saved.learned_version
    url = reverse("dashboard:agent_history", args=[agent.pk, part])
    if not request.htmx:
        return redirect(f"{url}?{urlencode({'version': new_version})}")
    found = selectors.agent_part_history(agent=saved, part=part, version=new_version)
    context = {
        **_history_context(saved, part, "", found),
        "notice": f"Restored version {version} as version {new_version}.",
    }
    return render(request, f"{HISTORY_TEMPLATE}#main", context)


def _restore_refused(
    request: HtmxHttpRequest, agent: Agent, part: str, message: str, status: int, latest: int | None = None
) -> HttpResponse:
    context = {"agent": agent, "part": part, "message": message, "latest": latest}
    response = render(request, f"{HISTORY_TEMPLATE}#restore-refused", context, status=status)
    return reswap(retarget(response, "#restore-editor"), "innerHTML")
