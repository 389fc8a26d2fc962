"""The dashboard's search of what sessions said (DESIGN.md, "Agents": `recall`, the same search
the model runs): on an agent's page over its sessions, on a session's page over the session's own
scope; each hit links to its message in place (the messages around it, and its archive when its
epoch is over). A query is plain words; one without any is answered with a form error."""

from __future__ import annotations

import uuid

from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from sessions_app.dashboard import selectors
from sessions_app.dashboard.agent_forms import RecallSearchForm
from sessions_app.dashboard.auth import operator_required
from sessions_app.dashboard.views.agents import agent_or_404
from sessions_app.dashboard.views.common import HtmxHttpRequest, session_or_404
from sessions_app.models import Agent, AgentSession

RESULTS = "dashboard/recall.html#results"


def _search(request: HtmxHttpRequest, *, agent: Agent | None, session: AgentSession | None) -> HttpResponse:
    form = RecallSearchForm(request.GET)
    context: dict = {"form": form, "agent": agent, "session": session, "hits": None}
    if not form.is_valid():
        return render(request, RESULTS, context, status=400)
    try:
        context["hits"] = selectors.search_hits(query=form.cleaned_data["q"], agent=agent, session=session)
    except selectors.RecallQueryEmpty as exc:
        form.add_error("q", str(exc))
        return render(request, RESULTS, context, status=400)
    return render(request, RESULTS if request.htmx else "dashboard/recall.html", context)


@require_safe
@operator_required
def agent_search(request: HtmxHttpRequest, agent_id: int) -> HttpResponse:
    return _search(request, agent=agent_or_404(agent_id), session=None)


@require_safe
@operator_required
def session_search(request: HtmxHttpRequest, session_id: uuid.UUID) -> HttpResponse:
    return _search(request, agent=None, session=session_or_404(session_id))


@require_safe
@operator_required
def message_in_place(request: HtmxHttpRequest, session_id: uuid.UUID, position: int) -> HttpResponse:
    session = session_or_404(session_id)
    try:
        place = selectors.message_in_place(session=session, position=position)
    except selectors.NotFound:
        raise Http404("No message at that position.") from None
    return render(request, "dashboard/message_in_place.html", {"session": session, "place": place})
