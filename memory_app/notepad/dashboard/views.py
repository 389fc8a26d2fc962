"""The notepad's views on the dashboard: its panel, its editor (under the conflict rule), one
version's text, and its history pages (every change, diffs, restore)."""

from __future__ import annotations

import uuid

from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from memory_app.notepad import selectors as notepad_selectors
from memory_app.notepad import services as notepad_services
from memory_app.notepad.dashboard import selectors as dashboard_selectors
from memory_app.notepad.dashboard.forms import NotepadForm
from memory_app.notepad.dashboard.panels import PANEL_NAME, TEMPLATE
from memory_app.notepad.models import NotepadRevision
from sessions_app.authors import operator_author
from sessions_app.dashboard.auth import operator_required
from sessions_app.dashboard.views.common import HtmxHttpRequest, operator_name, session_or_404
from sessions_app.dashboard.views.memory_history import (
    HistoryPages,
    RestoreConflict,
    RestoreRefused,
    history_page,
    history_restore,
)
from sessions_app.models import AgentSession


@require_safe
@operator_required
def notepad_panel(request: HtmxHttpRequest, session_id: uuid.UUID) -> HttpResponse:
    session = session_or_404(session_id)
    context = {"session": session, **dashboard_selectors.notepad_panel(session_id=session.pk)}
    return render(request, f"{TEMPLATE}#panel", context)


@require_http_methods(["GET", "POST"])
@operator_required
def notepad_edit(request: HtmxHttpRequest, session_id: uuid.UUID) -> HttpResponse:
    """GET: the editor, from the current version. POST: save it through the service.

    A notepad that changed since the editor opened is never overwritten: the editor comes back
    with both texts, its base moved to the current version, so saving again (after merging)
    replaces it on purpose.
    """
    session = session_or_404(session_id)
    if request.method == "GET":
        state = notepad_selectors.notepad_get(session_id=session.pk)
        form = NotepadForm(initial={"content": state.content, "base_version": state.version})
        return render(request, f"{TEMPLATE}#editor", {"session": session, "form": form})
    form = NotepadForm(request.POST)
    if not form.is_valid():
        return render(request, f"{TEMPLATE}#editor", {"session": session, "form": form}, status=422)
    try:
        revision = notepad_services.notepad_write(
            session_id=session.pk,
            content=form.cleaned_data["content"],
            author=operator_author(operator_name(request)),
            expected_version=form.cleaned_data["base_version"],
        )
    except notepad_services.NotepadConflict as conflict:
        form = NotepadForm(
            initial={"content": form.cleaned_data["content"], "base_version": conflict.version}
        )
        context = {"session": session, "form": form, "conflict": conflict}
        return render(request, f"{TEMPLATE}#editor", context, status=409)
    except notepad_services.NotepadEditError as exc:
        form.add_error("content", str(exc))
        return render(request, f"{TEMPLATE}#editor", {"session": session, "form": form}, status=422)
    context = {
        "session": session,
        "saved_version": revision.version,
        **dashboard_selectors.notepad_panel(session_id=session.pk),
    }
    return render(request, f"{TEMPLATE}#saved", context)


@require_safe
@operator_required
def notepad_revision(request: HtmxHttpRequest, session_id: uuid.UUID, version: int) -> HttpResponse:
    session = session_or_404(session_id)
    try:
        state = notepad_selectors.notepad_at_version(session_id=session.pk, version=version)
    except NotepadRevision.DoesNotExist:
        raise Http404("No such version.") from None
    return render(request, f"{TEMPLATE}#revision", {"session": session, "state": state})


# ---------------------------------------------------------------------------
# History
# ---------------------------------------------------------------------------
def _history_pages(session: AgentSession) -> HistoryPages:
    return HistoryPages(
        memory=dashboard_selectors.NOTEPAD,
        what="notepad",
        tab=PANEL_NAME,
        history=lambda **query: dashboard_selectors.notepad_history(session_id=session.pk, **query),
        restore_url=lambda version: reverse("dashboard:notepad_restore", args=[session.pk, version]),
    )


@require_safe
@operator_required
def notepad_history(request: HtmxHttpRequest, session_id: uuid.UUID) -> HttpResponse:
    session = session_or_404(session_id)
    return history_page(request, session, _history_pages(session))


@require_POST
@operator_required
def notepad_restore(request: HtmxHttpRequest, session_id: uuid.UUID, version: int) -> HttpResponse:
    session = session_or_404(session_id)
    try:
        text = notepad_selectors.notepad_at_version(session_id=session.pk, version=version).content
    except NotepadRevision.DoesNotExist:
        raise Http404("No such version of the notepad.") from None

    def save(content: str, base_version: int) -> int:
        try:
            revision = notepad_services.notepad_write(
                session_id=session.pk,
                content=content,
                author=operator_author(operator_name(request)),
                expected_version=base_version,
            )
        except notepad_services.NotepadConflict as conflict:
            raise RestoreConflict(conflict.version, conflict.content) from conflict
        except notepad_services.NotepadEditError as exc:
            raise RestoreRefused(str(exc)) from exc
        return revision.version

    return history_restore(request, session, _history_pages(session), version=version, text=text, save=save)
