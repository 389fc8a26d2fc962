"""The operator dashboard's pages, partials and actions.

Pages render whole templates; htmx requests get a partial of the same template
(`"page.html#part"`). Every action goes through a service; every read through a selector.
Live changes arrive over the dashboard websocket (`consumers.py`); an action's response also
carries what it changed, so a page without its websocket stays right.
"""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import urlencode

from asgiref.sync import sync_to_async
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect
from django_htmx.middleware import HtmxDetails

from memory_app.notepad import selectors as memory_selectors
from memory_app.notepad import services as memory_services
from memory_app.notepad.models import NotepadRevision
from memory_app.observations.selectors import (
    ObservationReadError,
    observation_grep,
    observation_read,
    observation_read_lines,
)
from memory_app.scratchpad import services as scratchpad_services
from memory_app.scratchpad.models import ScratchpadSpace
from sessions_app import selectors as session_selectors
from sessions_app import services
from sessions_app.authors import operator_author
from sessions_app.dashboard import selectors
from sessions_app.dashboard.auth import operator_required
from sessions_app.dashboard.forms import (
    MessageForm,
    NotepadForm,
    ObservationReadForm,
    ScratchpadSpaceForm,
    SessionCreateForm,
)
from sessions_app.engine import runner
from sessions_app.engine.compactor import ContextWindowTooSmall
from sessions_app.engine.features import features
from sessions_app.models import AgentSession, SessionStatus
from sessions_app.validation import SpecError


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


TABS = ("context", "notepad", "scratchpad", "observations", "archives", "inspector", "timeline")


def _session(session_id: Any) -> AgentSession:
    try:
        return selectors.session_get_for_operator(session_id=session_id)
    except selectors.NotFound:
        raise Http404("No such session.") from None


def _operator_name(request: HtmxHttpRequest) -> str:
    return request.user.get_username()


# ---------------------------------------------------------------------------
# The session list
# ---------------------------------------------------------------------------
def _list_filters(request: HtmxHttpRequest) -> dict[str, str]:
    return {
        "query": request.GET.get("q", "").strip(),
        "status": request.GET.get("status", ""),
        "model": request.GET.get("model", ""),
    }


def _list_context(request: HtmxHttpRequest) -> dict[str, Any]:
    filters = _list_filters(request)
    try:
        page = max(1, int(request.GET.get("page", "1")))
    except ValueError:
        page = 1
    size = selectors.SESSION_LIST_PAGE_SIZE
    rows = list(selectors.session_list(**filters)[(page - 1) * size : page * size + 1])
    query_string = urlencode({"q": filters["query"], "status": filters["status"], "model": filters["model"]})
    return {
        "sessions": rows[:size],
        "filters": filters,
        "page": page,
        "has_next": len(rows) > size,
        "query_string": query_string,
        "statuses": SessionStatus.choices,
        "models": selectors.session_models(),
    }


@require_GET
@operator_required
def session_list(request: HtmxHttpRequest) -> HttpResponse:
    context = _list_context(request)
    if request.htmx and request.htmx.target == "session-table":
        return render(request, "dashboard/session_list.html#session-table", context)
    context["create_form"] = SessionCreateForm()
    return render(request, "dashboard/session_list.html", context)


@require_POST
@operator_required
async def session_create(request: HtmxHttpRequest) -> HttpResponse:
    """A session no client owns. Its default context window is the one the agent websocket would
    give it: resolved here, on the event loop, as the websocket does."""
    form = SessionCreateForm(request.POST)
    if form.is_valid():
        fields = form.session_fields()
        fields["context_window"] = await services.session_context_window_resolve(
            model=fields["model"], context_window=fields["context_window"]
        )
        try:
            session = await sync_to_async(services.session_create)(
                owner=None, reserved_tool_names=features().tool_names(), **fields
            )
        except SpecError as exc:
            form.add_error(None, exc.message)
        else:
            url = reverse("dashboard:session", args=[session.pk])
            return HttpResponseClientRedirect(url) if request.htmx else redirect(url)
    return await sync_to_async(render)(
        request, "dashboard/session_list.html#create-form", {"create_form": form}, status=422
    )


# ---------------------------------------------------------------------------
# The session page
# ---------------------------------------------------------------------------
def _notepad_context(session: AgentSession) -> dict[str, Any]:
    revisions = list(
        NotepadRevision.objects.filter(session_id=session.pk)
        .defer("content")
        .order_by("-version")[: selectors.NOTEPAD_REVISIONS_SHOWN]
    )
    return {"notepad": memory_selectors.notepad_get(session_id=session.pk), "notepad_revisions": revisions}


def _scratchpad_context(session: AgentSession) -> dict[str, Any]:
    return {"spaces": selectors.scratchpad_spaces(session=session)}


def _space_context(session: AgentSession, space: str) -> dict[str, Any]:
    spaces = selectors.scratchpad_spaces(session=session, only=space)
    return {"session": session, "space": spaces[0]}


def session_page_context(session: AgentSession) -> dict[str, Any]:
    """What the session page shows when it loads (every panel but the lazy ones)."""
    last_seq = session.last_seq  # before the transcript: what is newer arrives over the websocket
    context: dict[str, Any] = {
        "session": session,
        "last_seq": last_seq,
        "page": selectors.transcript_page(session_id=session.pk),
        "streaming": selectors.stream_in_progress(session=session),
        "gauge": selectors.context_gauge(session=session),
        "timeline": selectors.timeline(session_id=session.pk),
        "observations": selectors.observations_of(session_id=session.pk),
        "message_form": MessageForm(),
    }
    context.update(_notepad_context(session))
    context.update(_scratchpad_context(session))
    return context


@require_GET
@operator_required
def session_detail(request: HtmxHttpRequest, session_id: uuid.UUID) -> HttpResponse:
    session = _session(session_id)
    context = session_page_context(session)
    tab = request.GET.get("tab", "")
    context["tab"] = tab if tab in TABS else "context"
    # Bookmarked archive and request: the lazy panel loads with them.
    context["archive_query"] = urlencode({"epoch": request.GET["epoch"]}) if request.GET.get("epoch") else ""
    context["call_query"] = urlencode({"call": request.GET["call"]}) if request.GET.get("call") else ""
    return render(request, "dashboard/session.html", context)


@require_GET
@operator_required
def session_status(request: HtmxHttpRequest, session_id: uuid.UUID) -> HttpResponse:
    return render(request, "dashboard/session.html#status", {"session": _session(session_id)})


@require_GET
@operator_required
def transcript_older(request: HtmxHttpRequest, session_id: uuid.UUID) -> HttpResponse:
    session = _session(session_id)
    try:
        before = int(request.GET["before"])
    except (KeyError, ValueError):
        raise Http404("before must be a message position") from None
    page = selectors.transcript_page(session_id=session.pk, before_position=before)
    return render(request, "dashboard/session.html#transcript-older", {"session": session, "page": page})


@require_POST
@operator_required
async def message_send(request: HtmxHttpRequest, session_id: uuid.UUID) -> HttpResponse:
    """Talk to the session as a client would: the message starts a turn (refused while one runs)."""
    session = await sync_to_async(_session)(session_id)
    form = MessageForm(request.POST)
    error = ""
    if form.is_valid():
        try:
            await runner.turn_start(session_id=session.pk, content=form.cleaned_data["content"])
        except services.TurnInProgress:
            error = "A turn is running in this session: wait for it to finish, or cancel it."
        except ContextWindowTooSmall as exc:
            error = str(exc)
        else:
            form = MessageForm()
    context = {"session": session, "message_form": form, "message_error": error}
    return await sync_to_async(render)(
        request, "dashboard/session.html#message-form", context, status=409 if error else 200
    )


@require_POST
@operator_required
async def turn_cancel(request: HtmxHttpRequest, session_id: uuid.UUID) -> HttpResponse:
    session = await sync_to_async(_session)(session_id)
    error = ""
    try:
        await sync_to_async(services.turn_cancel_request)(session_id=session.pk)
    except services.NoTurnInProgress:
        error = "No turn is running."
    else:
        # In this process the turn wakes at once; in another it sees the request on its next poll.
        runner.turn_notify(session.pk)
    context = {"session": session, "message_form": MessageForm(), "message_error": error}
    return await sync_to_async(render)(request, "dashboard/session.html#message-form", context)


# ---------------------------------------------------------------------------
# Context gauge and timeline
# ---------------------------------------------------------------------------
@require_GET
@operator_required
def context_panel(request: HtmxHttpRequest, session_id: uuid.UUID) -> HttpResponse:
    session = _session(session_id)
    return render(
        request,
        "dashboard/context.html#gauge",
        {"session": session, "gauge": selectors.context_gauge(session=session)},
    )


@require_GET
@operator_required
def timeline_panel(request: HtmxHttpRequest, session_id: uuid.UUID) -> HttpResponse:
    session = _session(session_id)
    return render(
        request,
        "dashboard/context.html#timeline",
        {"session": session, "timeline": selectors.timeline(session_id=session.pk)},
    )


# ---------------------------------------------------------------------------
# Notepad
# ---------------------------------------------------------------------------
@require_GET
@operator_required
def notepad_panel(request: HtmxHttpRequest, session_id: uuid.UUID) -> HttpResponse:
    session = _session(session_id)
    return render(request, "dashboard/notepad.html#panel", {"session": session, **_notepad_context(session)})


@require_http_methods(["GET", "POST"])
@operator_required
def notepad_edit(request: HtmxHttpRequest, session_id: uuid.UUID) -> HttpResponse:
    """GET: the editor, from the current version. POST: save it through the service.

    A notepad that changed since the editor opened is never overwritten: the editor comes back
    with both texts, its base moved to the current version, so saving again (after merging)
    replaces it on purpose.
    """
    session = _session(session_id)
    if request.method == "GET":
        state = memory_selectors.notepad_get(session_id=session.pk)
        form = NotepadForm(initial={"content": state.content, "base_version": state.version})
        return render(request, "dashboard/notepad.html#editor", {"session": session, "form": form})
    form = NotepadForm(request.POST)
    if not form.is_valid():
        return render(
            request, "dashboard/notepad.html#editor", {"session": session, "form": form}, status=422
        )
    try:
        revision = memory_services.notepad_write(
            session_id=session.pk,
            content=form.cleaned_data["content"],
            author=operator_author(_operator_name(request)),
            expected_version=form.cleaned_data["base_version"],
        )
    except memory_services.NotepadConflict as conflict:
        form = NotepadForm(
            initial={"content": form.cleaned_data["content"], "base_version": conflict.version}
        )
        context = {"session": session, "form": form, "conflict": conflict}
        return render(request, "dashboard/notepad.html#editor", context, status=409)
    except memory_services.NotepadEditError as exc:
        form.add_error("content", str(exc))
        return render(
            request, "dashboard/notepad.html#editor", {"session": session, "form": form}, status=422
        )
    context = {"session": session, "saved_version": revision.version, **_notepad_context(session)}
    return render(request, "dashboard/notepad.html#saved", context)


@require_GET
@operator_required
def notepad_revision(request: HtmxHttpRequest, session_id: uuid.UUID, version: int) -> HttpResponse:
    session = _session(session_id)
    try:
        state = memory_selectors.notepad_at_version(session_id=session.pk, version=version)
    except NotepadRevision.DoesNotExist:
        raise Http404("No such version.") from None
    return render(request, "dashboard/notepad.html#revision", {"session": session, "state": state})


# ---------------------------------------------------------------------------
# Scratchpad spaces
# ---------------------------------------------------------------------------
@require_http_methods(["GET", "POST"])
@operator_required
def scratchpad_edit(request: HtmxHttpRequest, session_id: uuid.UUID, space: str) -> HttpResponse:
    """One space's editor and its save, with the notepad's conflict rule."""
    session = _session(session_id)
    if space not in ScratchpadSpace.values:
        raise Http404("No such space.")
    context = _space_context(session, space)
    if request.method == "GET":
        current = context["space"]
        form = ScratchpadSpaceForm(
            initial={"space": space, "value": current.text, "base_version": current.version}
        )
        return render(request, "dashboard/scratchpad.html#editor", {**context, "form": form})
    form = ScratchpadSpaceForm(request.POST)
    if not form.is_valid() or form.cleaned_data["space"] != space:
        return render(request, "dashboard/scratchpad.html#editor", {**context, "form": form}, status=422)
    try:
        scratchpad_services.scratchpad_space_set(
            session_id=session.pk,
            space=space,
            value=form.space_value(),
            author=operator_author(_operator_name(request)),
            expected_version=form.cleaned_data["base_version"],
        )
    except scratchpad_services.ScratchpadConflict as conflict:
        current = conflict.current_value
        form = ScratchpadSpaceForm(
            initial={
                "space": space,
                "value": form.cleaned_data["value"],
                "base_version": conflict.current_version,
            }
        )
        conflict_text = "\n".join(current) if isinstance(current, list) else current
        return render(
            request,
            "dashboard/scratchpad.html#editor",
            {**context, "form": form, "conflict": conflict, "conflict_text": conflict_text},
            status=409,
        )
    except scratchpad_services.ScratchpadInvalidValue as exc:
        form.add_error("value", str(exc))
        return render(request, "dashboard/scratchpad.html#editor", {**context, "form": form}, status=422)
    return render(request, "dashboard/scratchpad.html#saved", _space_context(session, space))


# ---------------------------------------------------------------------------
# Observations
# ---------------------------------------------------------------------------
@require_GET
@operator_required
def observation_list(request: HtmxHttpRequest, session_id: uuid.UUID) -> HttpResponse:
    session = _session(session_id)
    context = {"session": session, "observations": selectors.observations_of(session_id=session.pk)}
    return render(request, "dashboard/observations.html#list", context)


@require_GET
@operator_required
def observation_view(request: HtmxHttpRequest, session_id: uuid.UUID, observation_id: str) -> HttpResponse:
    """An observation and one read of it (head, tail, range, lines or grep), as the model reads."""
    session = _session(session_id)
    try:
        observation = selectors.observation_get_for_operator(
            session_id=session.pk, observation_id=observation_id
        )
    except selectors.NotFound:
        raise Http404("No such observation in this session.") from None
    form = ObservationReadForm(request.GET or {"mode": "head"})
    result: dict[str, Any] | None = None
    error = ""
    if form.is_valid():
        mode, arguments = form.cleaned_data["mode"], form.read_arguments()
        try:
            if mode == "lines":
                result = observation_read_lines(
                    observation=observation,
                    start_line=arguments.get("start_line", 1),
                    end_line=arguments.get("end_line"),
                )
            elif mode == "grep":
                result = observation_grep(
                    observation=observation,
                    pattern=arguments.get("pattern"),
                    context=arguments.get("context"),
                    max_matches=None,
                )
            else:
                result = observation_read(observation=observation, mode=mode, arguments=arguments)
        except ObservationReadError as exc:
            error = str(exc)
    context = {
        "session": session,
        "observation": observation,
        "form": form,
        "result": result,
        "result_meta": {k: v for k, v in (result or {}).items() if k not in ("content", "scratchpad_id")},
        "error": error,
    }
    return render(request, "dashboard/observations.html#viewer", context)


# ---------------------------------------------------------------------------
# The archive stepper
# ---------------------------------------------------------------------------
@require_GET
@operator_required
def archive_panel(request: HtmxHttpRequest, session_id: uuid.UUID) -> HttpResponse:
    session = _session(session_id)
    try:
        step = selectors.archive_step(session_id=session.pk, epoch=request.GET.get("epoch"))
    except selectors.NotFound:
        raise Http404("No archive of that epoch.") from None
    context: dict[str, Any] = {"session": session, "step": step}
    if step is not None:
        context["archived"] = selectors.archive_messages_page(archive=step.archive)
    return render(request, "dashboard/archive.html#stepper", context)


@require_GET
@operator_required
def archive_messages(request: HtmxHttpRequest, session_id: uuid.UUID, epoch: int) -> HttpResponse:
    session = _session(session_id)
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
@require_GET
@operator_required
def inspector_panel(request: HtmxHttpRequest, session_id: uuid.UUID) -> HttpResponse:
    session = _session(session_id)
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


@require_GET
@operator_required
def model_call_request_json(request: HtmxHttpRequest, session_id: uuid.UUID, call_id: int) -> HttpResponse:
    """The exact request body of a model call, as JSON (the inspector shows its last messages)."""
    session = _session(session_id)
    try:
        call = selectors.model_call_get(session_id=session.pk, call_id=call_id)
    except selectors.NotFound:
        raise Http404("No such model call in this session.") from None
    assert call is not None
    body = session_selectors.model_call_request(call=call)
    response = JsonResponse(body, json_dumps_params={"ensure_ascii": False, "indent": 2})
    response["Content-Disposition"] = f'inline; filename="request-{call.pk}.json"'
    return response
