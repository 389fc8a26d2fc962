"""An operator edits an agent's learned text and its state (DESIGN.md, "Agents"): each save names
the version its editor opened at, and a change made meanwhile (by a session's model, a client or
another operator) is never overwritten: the editor comes back with both texts (status 409).

Writes go through the knowledge services (`agent_learned_write`, `agent_state_set`,
`agent_state_delete`), as the operator (`operator:<username>`), within the agent's limits. What
the model wrote is shown escaped or as sanitized markdown, never marked safe.
"""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST
from django_htmx.http import reswap, retarget

from sessions_app import services
from sessions_app.agent_knowledge_rules import AgentKnowledgeError, AgentStateConflict
from sessions_app.authors import operator_author
from sessions_app.dashboard import selectors
from sessions_app.dashboard.agent_knowledge_forms import LearnedForm, StateDeleteForm, StateForm, StateKeyForm
from sessions_app.dashboard.auth import operator_required
from sessions_app.dashboard.views.agents import VERSIONS_SHOWN, agent_or_404, state_context
from sessions_app.dashboard.views.common import HtmxHttpRequest, operator_name
from sessions_app.engine.agent_limits import learned_max_chars
from sessions_app.models import Agent, AgentPart, AgentStateEntry

EDIT_TEMPLATE = "dashboard/agent_edit.html"


def _editor(response: HttpResponse, slot: str) -> HttpResponse:
    """A refused save: the editor comes back into its slot, the page around it stays."""
    return reswap(retarget(response, f"#{slot}"), "innerHTML")


# ---------------------------------------------------------------------------
# The learned text
# ---------------------------------------------------------------------------
@require_http_methods(["GET", "POST"])
@operator_required
def agent_learned_edit(request: HtmxHttpRequest, agent_id: int) -> HttpResponse:
    """GET: the editor, from the current version. POST: the whole text saved as a new version
    (`agent_learned_write` with the version the editor opened at); over the agent's
    `knowledge.learned_max_chars`: a form error (422); changed meanwhile: both texts (409)."""
    agent = agent_or_404(agent_id)
    template = f"{EDIT_TEMPLATE}#learned-editor"
    if request.method == "GET":
        form = LearnedForm(initial={"learned": agent.learned, "base_version": agent.learned_version})
        return render(request, template, {"agent": agent, "form": form})
    form = LearnedForm(request.POST)
    if not form.is_valid():
        return _editor(
            render(request, template, {"agent": agent, "form": form}, status=422), "learned-editor"
        )
    text = form.cleaned_data["learned"]
    try:
        services.agent_learned_write(
            agent_id=agent.pk,
            content=text,
            author=operator_author(operator_name(request)),
            max_chars=learned_max_chars(agent),
            expected_version=form.cleaned_data["base_version"],
        )
    except services.AgentLearnedConflict as changed:
        context = {
            "agent": agent,
            "form": LearnedForm(initial={"learned": text, "base_version": changed.version}),
            "conflict": True,
            "conflict_version": changed.version,
            "conflict_text": changed.content,
        }
        return _editor(render(request, template, context, status=409), "learned-editor")
    except AgentKnowledgeError as exc:
        form.add_error("learned", str(exc))
        return _editor(
            render(request, template, {"agent": agent, "form": form}, status=422), "learned-editor"
        )
    if not request.htmx:
        return redirect(reverse("dashboard:agent", args=[agent.pk]))
    saved = agent_or_404(agent.pk)
    context = {
        "agent": saved,
        "learned_versions": selectors.agent_versions_latest(
            agent=saved, part=AgentPart.LEARNED, limit=VERSIONS_SHOWN
        ),
        "notice": f"Saved as version {saved.learned_version}: new sessions start from it, running ones "
        "at their next compaction.",
    }
    return render(request, "dashboard/agent.html#learned", context)


# ---------------------------------------------------------------------------
# State
# ---------------------------------------------------------------------------
def _state_page(request: HtmxHttpRequest, agent: Agent, notice: str, status: int = 200) -> HttpResponse:
    """After a change (or a refused delete): the state's first page, saying what happened."""
    if not request.htmx and status == 200:
        return redirect(reverse("dashboard:agent", args=[agent.pk]))
    state, _ = state_context(request, agent)
    context = {"agent": agent, "notice": notice, "notice_refused": status != 200, **state}
    return render(request, "dashboard/agent.html#state", context, status=status)


def _state_form_context(agent: Agent, form: StateForm, **extra: Any) -> dict[str, Any]:
    return {"agent": agent, "form": form, "new_key": not form["base_version"].value(), **extra}


@require_http_methods(["GET", "POST"])
@operator_required
def agent_state_edit(request: HtmxHttpRequest, agent_id: int) -> HttpResponse:
    """GET `?key=`: the editor of that key at its current version (no key, or one that does not
    exist: a new key). POST: the value (JSON) set (`agent_state_set` with the version the editor
    opened at, 0 for a new key). Not JSON, over the limits: a form error (422); changed meanwhile
    (or a new key that exists now): both values (409)."""
    agent = agent_or_404(agent_id)
    template = f"{EDIT_TEMPLATE}#state-editor"
    if request.method == "GET":
        query = StateKeyForm(request.GET)
        key = query.cleaned_data.get("key", "") if query.is_valid() else ""
        entry = AgentStateEntry.objects.filter(agent=agent, key=key).first() if key else None
        initial: dict[str, Any] = {"key": key, "base_version": 0}
        if entry is not None:
            initial = {"key": key, "value": _json_text(entry.value), "base_version": entry.version}
        form = StateForm(initial=initial)
        return render(request, template, _state_form_context(agent, form))
    form = StateForm(request.POST)
    if not form.is_valid():
        return _editor(
            render(request, template, _state_form_context(agent, form), status=422), "state-editor"
        )
    key, value = form.cleaned_data["key"], form.cleaned_data["value"]
    try:
        entry = services.agent_state_set(
            agent_id=agent.pk,
            key=key,
            value=value,
            author=operator_author(operator_name(request)),
            expected_version=form.cleaned_data["base_version"],
        )
    except AgentStateConflict as changed:
        now = AgentStateEntry.objects.filter(agent=agent, key=key).first()
        base = changed.version or 0
        retry = StateForm(initial={"key": key, "value": form.data.get("value", ""), "base_version": base})
        context = _state_form_context(
            agent,
            retry,
            conflict=True,
            conflict_version=base,
            conflict_text=_json_text(now.value) if now is not None else "(deleted)",
        )
        return _editor(render(request, template, context, status=409), "state-editor")
    except AgentKnowledgeError as exc:
        form.add_error("value" if str(exc).startswith("The value") else "key", str(exc))
        return _editor(
            render(request, template, _state_form_context(agent, form), status=422), "state-editor"
        )
    return _state_page(request, agent, f'Saved "{entry.key}" as version {entry.version}.')


@require_POST
@operator_required
def agent_state_delete(request: HtmxHttpRequest, agent_id: int) -> HttpResponse:
    """The key deleted, if it is still at the version the page showed; otherwise nothing changes
    and the state is shown as it is now, saying why (409)."""
    agent = agent_or_404(agent_id)
    form = StateDeleteForm(request.POST)
    if not form.is_valid():
        return HttpResponse("The page sent no key or version: reload it.", status=422)
    key = form.cleaned_data["key"]
    try:
        services.agent_state_delete(
            agent_id=agent.pk,
            key=key,
            author=operator_author(operator_name(request)),
            expected_version=form.cleaned_data["base_version"],
        )
    except AgentStateConflict as changed:
        notice = (
            f'Not deleted: "{key}" changed since this page was loaded (it is now version '
            f"{changed.version}). Nothing was changed; look at its value now, then decide again."
        )
        return _state_page(request, agent, notice, status=409)
    except AgentKnowledgeError as exc:
        return _state_page(request, agent, f"Not deleted: {exc}", status=409)
    return _state_page(request, agent, f'Deleted "{key}".')


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2)
