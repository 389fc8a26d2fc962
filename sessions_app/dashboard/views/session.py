"""The session page: the page itself, its status, older transcript pages, the message box and
cancel, ending and deletion, the context gauge and the timeline.

Pages render whole templates; htmx requests get a partial of the same template
(`"page.html#part"`). Live changes arrive over the dashboard websocket (`consumers.py`).
"""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import urlencode

from asgiref.sync import sync_to_async
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe
from django_htmx.http import HttpResponseClientRedirect

from sessions_app import services
from sessions_app.dashboard import panels, selectors
from sessions_app.dashboard.auth import operator_required
from sessions_app.dashboard.forms import MessageForm, SessionUpdateForm
from sessions_app.dashboard.usage_panel import usage_panel_context
from sessions_app.dashboard.views.common import HtmxHttpRequest, session_or_404
from sessions_app.engine import agents as engine_agents
from sessions_app.engine import runner
from sessions_app.engine import sessions as engine_sessions
from sessions_app.engine.compaction.budget import ContextWindowTooSmall
from sessions_app.engine.operator import compaction_operator_start
from sessions_app.engine.providers import provider_name_for_model
from sessions_app.models import AgentSession
from sessions_app.usage import session_usage
from sessions_app.validation import SpecError


def session_page_context(session: AgentSession) -> dict[str, Any]:
    """What the session page shows when it loads: its own panels but the lazy ones (the
    features' panels come from `panels`)."""
    last_seq = session.last_seq  # before the transcript: what is newer arrives over the websocket
    context: dict[str, Any] = {
        "session": session,
        "last_seq": last_seq,
        "page": selectors.transcript_page(session_id=session.pk, until_seq=last_seq),
        "streaming": selectors.stream_in_progress(session=session),
        "gauge": selectors.context_gauge(session=session),
        **usage_panel_context(session),
        "timeline": selectors.timeline(session_id=session.pk),
        "message_form": MessageForm(),
        "update_form": session_update_form(session),
        # The session's calls waiting for an approval, answered here (`views.approvals`).
        "approvals": (
            selectors.approvals_pending(session_id=session.pk) if session.current_turn_id is not None else []
        ),
    }
    return context


def session_update_form(session: AgentSession) -> SessionUpdateForm:
    """The session's edit form, showing its current title, window and threshold."""
    return SessionUpdateForm(initial=SessionUpdateForm.initial_of(session))


@require_safe
@operator_required
def session_detail(request: HtmxHttpRequest, session_id: uuid.UUID) -> HttpResponse:
    session = session_or_404(session_id)
    context = session_page_context(session)
    context["head_panels"] = panels.head_panels(session, request)
    context["tab_panels"] = panels.tab_panels(session, request)
    context["tabs"] = panels.session_tabs()
    asked = request.GET.get("tab", "")
    tab = panels.TAB_ALIASES.get(asked, asked)
    known = tab in {t.name for t in context["tabs"]}
    context["tab"] = tab if known else panels.DEFAULT_TAB
    # A tab the page does not have opens the default one, and the page says so.
    context["tab_unknown"] = asked if asked and not known else ""
    # Bookmarked archive and request: the lazy panel loads with them.
    context["archive_query"] = urlencode({"epoch": request.GET["epoch"]}) if request.GET.get("epoch") else ""
    context["call_query"] = urlencode({"call": request.GET["call"]}) if request.GET.get("call") else ""
    return render(request, "dashboard/session.html", context)


@require_safe
@operator_required
def session_status(request: HtmxHttpRequest, session_id: uuid.UUID) -> HttpResponse:
    return render(request, "dashboard/session.html#status", {"session": session_or_404(session_id)})


@require_safe
@operator_required
def transcript_older(request: HtmxHttpRequest, session_id: uuid.UUID) -> HttpResponse:
    session = session_or_404(session_id)
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
    session = await sync_to_async(session_or_404)(session_id)
    form = MessageForm(request.POST)
    error = ""
    if form.is_valid():
        try:
            await runner.turn_start(session_id=session.pk, content=form.cleaned_data["content"])
        except services.TokenRevoked:
            error = "This session's agent token is revoked: its sessions run no more turns."
        except services.TurnInProgress:
            error = "A turn is running in this session: wait for it to finish, or cancel it."
        except services.SessionEnded:
            error = "This session has ended: it takes no more messages."
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
async def compaction_start(request: HtmxHttpRequest, session_id: uuid.UUID) -> HttpResponse:
    """Compact the session now (an operator's compaction): refused while a turn runs."""
    session = await sync_to_async(session_or_404)(session_id)
    error = ""
    try:
        await compaction_operator_start(session_id=session.pk)
    except services.TurnInProgress:
        error = "A turn is running in this session: compact once it has finished."
    except services.SessionEnded:
        error = "This session has ended: it is kept as it is."
    context = {"session": session, "message_form": MessageForm(), "message_error": error}
    return await sync_to_async(render)(
        request, "dashboard/session.html#message-form", context, status=409 if error else 200
    )


@require_POST
@operator_required
async def turn_cancel(request: HtmxHttpRequest, session_id: uuid.UUID) -> HttpResponse:
    session = await sync_to_async(session_or_404)(session_id)
    error = ""
    try:
        # A turn whose process died is ended (nothing to cancel then) or taken over first.
        await runner.turn_repair_if_dead(session_id=session.pk)
        await sync_to_async(services.turn_cancel_request)(session_id=session.pk)
    except services.NoTurnInProgress:
        error = "No turn is running."
    else:
        # In this process the turn wakes at once; in another it sees the request on its next poll.
        runner.turn_notify(session.pk)
    context = {"session": session, "message_form": MessageForm(), "message_error": error}
    return await sync_to_async(render)(request, "dashboard/session.html#message-form", context)


# The reason `session.ended` gives when an operator ended the session (PROTOCOL.md v1.2).
END_REASON_OPERATOR = "operator"


@require_POST
@operator_required
async def session_end(request: HtmxHttpRequest, session_id: uuid.UUID) -> HttpResponse:
    """End the session and its sub-sessions (`engine.agents.session_end`, as a client's
    `session.end`): a running turn is cancelled first; from then on it takes no messages. htmx
    gets the page's message box back as the ended notice (and the new status); a plain form post
    is redirected to the page. Ending an ended session changes nothing."""
    session = await sync_to_async(session_or_404)(session_id)
    try:
        await engine_agents.session_end(session_id=session.pk, reason=END_REASON_OPERATOR)
    except AgentSession.DoesNotExist:
        raise Http404("No such session.") from None
    if not request.htmx:
        return redirect(reverse("dashboard:session", args=[session.pk]))
    session = await sync_to_async(session_or_404)(session.pk)
    ended = await sync_to_async(render)(request, "dashboard/session.html#ended", {"session": session})
    status = await sync_to_async(render)(
        request, "dashboard/session.html#status", {"session": session, "oob": True}
    )
    return HttpResponse(ended.content + status.content)


@require_POST
@operator_required
def session_delete(request: HtmxHttpRequest, session_id: uuid.UUID) -> HttpResponse:
    """Delete the session with its sub-sessions (`engine.sessions.session_delete`, as the admin
    does), then go to the list: htmx follows `HX-Redirect`, a plain form post a redirect. Refused
    while a turn runs (the message form says so, status 409)."""
    session = session_or_404(session_id)
    error = ""
    try:
        engine_sessions.session_delete(session_id=session.pk)
    except services.TurnInProgress:
        error = "A turn is running in this session or one of its sub-sessions: cancel it, then delete."
    except AgentSession.DoesNotExist:
        pass  # deleted meanwhile (by another operator): the list is where to go anyway
    if error:
        context = {"session": session, "message_form": MessageForm(), "message_error": error}
        return render(request, "dashboard/session.html#message-form", context, status=409)
    target = reverse("dashboard:sessions")
    return HttpResponseClientRedirect(target) if request.htmx else redirect(target)


@require_POST
@operator_required
def session_edit(request: HtmxHttpRequest, session_id: uuid.UUID) -> HttpResponse:
    """Change the session's title, window, threshold or settings (`engine.sessions.session_update`,
    as a client's `session.update`). A bad value is shown on its field (status 422) and changes
    nothing; a new window or threshold applies from the session's next model call. htmx gets the
    form back (saved, or with its errors); a plain form post is redirected to the page."""
    session = session_or_404(session_id)
    form = SessionUpdateForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        try:
            session = engine_sessions.session_update(
                session_id=session.pk,
                title=data["title"],
                context_window=data["context_window"],
                compact_threshold=data["compact_threshold"],
                settings=data["settings"],
            )
        except SpecError as exc:
            form.add_spec_error(exc)
        except AgentSession.DoesNotExist:
            raise Http404("No such session.") from None
        else:
            if not request.htmx:
                return redirect(reverse("dashboard:session", args=[session.pk]))
            context = {"session": session, "update_form": session_update_form(session), "update_saved": True}
            # The usage panel too (out of band): it shows spend against the budget just changed.
            form_html = render(request, "dashboard/session.html#update-form", context)
            panel = render(
                request,
                "dashboard/usage.html#panel",
                {"session": session, "oob": True, **usage_panel_context(session)},
            )
            form_html.content += panel.content
            return form_html
    context = {"session": session, "update_form": form}
    return render(request, "dashboard/session.html#update-form", context, status=422)


# ---------------------------------------------------------------------------
# Context gauge and timeline
# ---------------------------------------------------------------------------
@require_safe
@operator_required
def context_panel(request: HtmxHttpRequest, session_id: uuid.UUID) -> HttpResponse:
    session = session_or_404(session_id)
    return render(
        request,
        "dashboard/context.html#gauge",
        {"session": session, "gauge": selectors.context_gauge(session=session)},
    )


@require_safe
@operator_required
def timeline_panel(request: HtmxHttpRequest, session_id: uuid.UUID) -> HttpResponse:
    session = session_or_404(session_id)
    return render(
        request,
        "dashboard/context.html#timeline",
        {"session": session, "timeline": selectors.timeline(session_id=session.pk)},
    )


@require_safe
@operator_required
def turn_usage_panel(request: HtmxHttpRequest, session_id: uuid.UUID) -> HttpResponse:
    """The usage panel's table of turns: its first page, or with `before` (a turn's id) the
    rows of the turns older than that one (appended to the table)."""
    session = session_or_404(session_id)
    price = session_usage(session, provider=provider_name_for_model(session.model)).price
    before = request.GET.get("before", "")
    try:
        turns = selectors.turn_usage_page(session=session, price=price, before=before)
    except selectors.NotFound:
        raise Http404("No such turn in this session.") from None
    part = "turn-rows" if before else "turns"
    return render(request, f"dashboard/usage.html#{part}", {"session": session, "turns": turns})
