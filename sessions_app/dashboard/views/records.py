"""The archive stepper and the prompt inspector: what a session's compactions archived and
what each model call was sent."""

from __future__ import annotations

import uuid
from typing import Any

from django.http import Http404, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from sessions_app import selectors as session_selectors
from sessions_app.dashboard import panels, selectors
from sessions_app.dashboard.auth import operator_required
from sessions_app.dashboard.views.common import HtmxHttpRequest, session_or_404
from sessions_app.engine import transfer


# ---------------------------------------------------------------------------
# The archive stepper
# ---------------------------------------------------------------------------
@require_safe
@operator_required
def archive_panel(request: HtmxHttpRequest, session_id: uuid.UUID) -> HttpResponse:
    session = session_or_404(session_id)
    try:
        step = selectors.archive_step(session_id=session.pk, epoch=request.GET.get("epoch"))
    except selectors.NotFound:
        raise Http404("No archive of that epoch.") from None
    context: dict[str, Any] = {"session": session, "step": step}
    if step is not None:
        context["archived"] = selectors.archive_messages_page(archive=step.archive)
        # The features as they stood then, and their memories' histories at that moment.
        context["archive_sections"] = panels.archive_sections(session, step.archive, request)
        context["memory_histories"] = panels.memory_history_links(session.pk)
    return render(request, "dashboard/archive.html#stepper", context)


@require_safe
@operator_required
def archive_messages(request: HtmxHttpRequest, session_id: uuid.UUID, epoch: int) -> HttpResponse:
    session = session_or_404(session_id)
    try:
        step = selectors.archive_step(session_id=session.pk, epoch=epoch)
        after = int(request.GET["after"])
    except (selectors.NotFound, KeyError, ValueError):
        raise Http404("No such page of archived messages.") from None
    assert step is not None
    archived = selectors.archive_messages_page(archive=step.archive, after_position=after)
    return render(
        request, "dashboard/archive.html#messages", {"session": session, "step": step, "archived": archived}
    )


# ---------------------------------------------------------------------------
# The prompt inspector
# ---------------------------------------------------------------------------
@require_safe
@operator_required
def inspector_panel(request: HtmxHttpRequest, session_id: uuid.UUID) -> HttpResponse:
    session = session_or_404(session_id)
    call_id = request.GET.get("call")
    try:
        call = selectors.model_call_get(session_id=session.pk, call_id=call_id)
    except selectors.NotFound:
        raise Http404("No such model call in this session.") from None
    context = {
        "session": session,
        "inspected": selectors.request_inspect(call=call) if call is not None else None,
        # Without a chosen call the panel follows the latest one live.
        "follow": not call_id,
    }
    return render(request, "dashboard/inspector.html#inspector", context)


@require_safe
@operator_required
def model_call_request_json(request: HtmxHttpRequest, session_id: uuid.UUID, call_id: int) -> HttpResponse:
    """The exact request body of a model call, as JSON (the inspector shows its last messages)."""
    session = session_or_404(session_id)
    try:
        call = selectors.model_call_get(session_id=session.pk, call_id=call_id)
    except selectors.NotFound:
        raise Http404("No such model call in this session.") from None
    assert call is not None
    body = session_selectors.model_call_request(call=call)
    response = JsonResponse(body, json_dumps_params={"ensure_ascii": False, "indent": 2})
    response["Content-Disposition"] = f'inline; filename="request-{call.pk}.json"'
    return response


@require_safe
@operator_required
def session_export(request: HtmxHttpRequest, session_id: uuid.UUID) -> StreamingHttpResponse:
    """The session (with its sub-sessions) as one JSON document (docs/export.md), streamed: read
    piece by piece in the engine's database threads, never held whole in memory."""
    session = session_or_404(session_id)
    response = StreamingHttpResponse(transfer.export_stream(session.pk), content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="session-{session.pk}.json"'
    return response
