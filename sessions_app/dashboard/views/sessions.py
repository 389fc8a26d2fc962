"""The session list and creating a session from it."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from asgiref.sync import sync_to_async
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe
from django_htmx.http import HttpResponseClientRedirect

from sessions_app.dashboard import selectors
from sessions_app.dashboard.auth import operator_required
from sessions_app.dashboard.forms import SessionCreateForm
from sessions_app.dashboard.list_filters import (
    DEFAULT_SORT,
    OWNER_OPERATOR,
    QUERY_MAX_CHARS,
    ListFilters,
    SessionListForm,
    sort_headers,
)
from sessions_app.dashboard.views.common import HtmxHttpRequest
from sessions_app.engine import sessions as engine_sessions
from sessions_app.engine.features import features
from sessions_app.engine.providers import default_model, models_offered
from sessions_app.models import SessionStatus
from sessions_app.validation import SpecError


def _list_context(request: HtmxHttpRequest) -> dict[str, Any]:
    """The list's page of sessions under the request's filters and sort; with `list_errors` (and
    no sessions) when a parameter is not valid."""
    form = SessionListForm(request.GET)
    common = {
        "statuses": SessionStatus.choices,
        "models": selectors.session_models(),
        "owners": selectors.session_owners(),
        "owner_operator": OWNER_OPERATOR,
    }
    if not form.is_valid():
        filters = ListFilters(
            query=request.GET.get("q", "")[:QUERY_MAX_CHARS],
            status=form.cleaned_data.get("status", ""),
            model=form.cleaned_data.get("model", ""),
            owner=form.cleaned_data.get("owner", ""),
            children=form.cleaned_data.get("children", ""),
        )
        return {
            **common,
            "list_errors": form.error_lines(),
            "sessions": [],
            "filters": filters,
            "sort": DEFAULT_SORT,
            "headers": sort_headers(filters=filters, sort=DEFAULT_SORT),
            "page": 1,
            "has_next": False,
            "query_string": urlencode(filters.params()),
        }
    filters, sort = form.filters(), form.cleaned_data["sort"]
    page = form.cleaned_data["page"] or 1
    size = selectors.SESSION_LIST_PAGE_SIZE
    rows = list(
        selectors.session_list(**filters.selector_kwargs(), sort=sort)[(page - 1) * size : page * size + 1]
    )
    return {
        **common,
        "sessions": rows[:size],
        "filters": filters,
        "sort": sort,
        "headers": sort_headers(filters=filters, sort=sort),
        "page": page,
        "has_next": len(rows) > size,
        "query_string": urlencode({**filters.params(), "sort": sort}),
    }


def _create_context(form: SessionCreateForm) -> dict[str, Any]:
    return {
        "create_form": form,
        "default_model": default_model(),
        "known_models": models_offered(),
    }


@require_safe
@operator_required
def session_list(request: HtmxHttpRequest) -> HttpResponse:
    context = _list_context(request)
    status = 400 if context.get("list_errors") else 200
    if request.htmx and request.htmx.target == "session-table":
        return render(request, "dashboard/session_list.html#session-table", context, status=status)
    context.update(_create_context(SessionCreateForm()))
    return render(request, "dashboard/session_list.html", context, status=status)


@require_POST
@operator_required
async def session_create(request: HtmxHttpRequest) -> HttpResponse:
    """A session no client owns. Its default context window is the one the agent websocket would
    give it: resolved here, on the event loop, as the websocket does."""
    form = SessionCreateForm(request.POST)
    if form.is_valid():
        fields = form.session_fields()
        fields["context_window"] = await engine_sessions.session_context_window_resolve(
            model=fields["model"], context_window=fields["context_window"]
        )
        try:
            session = await sync_to_async(engine_sessions.session_create)(
                owner=None, reserved_tool_names=features().tool_names(), **fields
            )
        except SpecError as exc:
            form.add_error(None, exc.message)
        else:
            url = reverse("dashboard:session", args=[session.pk])
            return HttpResponseClientRedirect(url) if request.htmx else redirect(url)
    return await sync_to_async(render)(
        request, "dashboard/_session_create_form.html", _create_context(form), status=422
    )
