"""The memory history pages: every change of the notepad or of one scratchpad space, a line diff
of any change against the one before it or the current text, and "restore this version".

A restore is the operator's edit: the same service call, with the version the operator saw as
current. If the memory changed since (the agent wrote meanwhile), nothing is overwritten and the
conflict editor shows both texts, its base moved to the current version.
"""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import urlencode

from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import reswap, retarget

from memory_app.notepad import selectors as notepad_selectors
from memory_app.notepad import services as notepad_services
from memory_app.notepad.models import NotepadRevision
from memory_app.scratchpad import selectors as scratchpad_selectors
from memory_app.scratchpad import services as scratchpad_services
from memory_app.scratchpad.models import ScratchpadRevision, ScratchpadSpace
from sessions_app.authors import operator_author
from sessions_app.dashboard import selectors
from sessions_app.dashboard.auth import operator_required
from sessions_app.dashboard.history_forms import HistoryQueryForm, RestoreForm
from sessions_app.dashboard.views.common import HtmxHttpRequest, operator_name, session_or_404
from sessions_app.models import AgentSession

TEMPLATE = "dashboard/memory_history.html"
NOTEPAD = "notepad"


def _memory_or_404(space: str | None) -> str:
    if space is None:
        return NOTEPAD
    if space not in ScratchpadSpace.values:
        raise Http404("No such scratchpad space.")
    return space


def _history_url(session: AgentSession, memory: str) -> str:
    if memory == NOTEPAD:
        return reverse("dashboard:notepad_history", args=[session.pk])
    return reverse("dashboard:scratchpad_history", args=[session.pk, memory])


def _restore_url(session: AgentSession, memory: str, version: int) -> str:
    if memory == NOTEPAD:
        return reverse("dashboard:notepad_restore", args=[session.pk, version])
    return reverse("dashboard:scratchpad_restore", args=[session.pk, memory, version])


def _page_context(session: AgentSession, memory: str) -> dict[str, Any]:
    return {
        "session": session,
        "memory": memory,
        "what": "notepad" if memory == NOTEPAD else f"{memory} space",
        "history_url": _history_url(session, memory),
        "memories": [(name, _history_url(session, name)) for name in (NOTEPAD, *ScratchpadSpace.values)],
    }


def _history(session: AgentSession, memory: str, **query: Any) -> selectors.MemoryHistory:
    if memory == NOTEPAD:
        return selectors.notepad_history(session_id=session.pk, **query)
    return selectors.scratchpad_history(session_id=session.pk, space=memory, **query)


def _history_context(session: AgentSession, memory: str, history: selectors.MemoryHistory) -> dict[str, Any]:
    return {
        **_page_context(session, memory),
        "history": history,
        "restore_url": _restore_url(session, memory, history.selected_version),
        "older_query": urlencode(
            {"version": history.selected_version, "against": history.against, "before": history.older_before}
        ),
    }


def _history_page(request: HtmxHttpRequest, session_id: uuid.UUID, space: str | None) -> HttpResponse:
    session = session_or_404(session_id)
    memory = _memory_or_404(space)
    form = HistoryQueryForm(request.GET)
    if not form.is_valid():
        context = {**_page_context(session, memory), "query_errors": form.error_lines()}
        return render(request, TEMPLATE, context, status=400)
    try:
        history = _history(session, memory, **form.query())
    except selectors.NotFound:
        raise Http404(f"No such version of the {memory}.") from None
    return render(request, TEMPLATE, _history_context(session, memory, history))


@require_GET
@operator_required
def notepad_history(request: HtmxHttpRequest, session_id: uuid.UUID) -> HttpResponse:
    return _history_page(request, session_id, None)


@require_GET
@operator_required
def scratchpad_history(request: HtmxHttpRequest, session_id: uuid.UUID, space: str) -> HttpResponse:
    return _history_page(request, session_id, space)


# ---------------------------------------------------------------------------
# Restore
# ---------------------------------------------------------------------------
def _restored(
    request: HtmxHttpRequest, session: AgentSession, memory: str, *, restored: int, saved: int, edited: bool
) -> HttpResponse:
    """After a restore: the history with the new change selected (a page load without htmx)."""
    if not request.htmx:
        return redirect(f"{_history_url(session, memory)}?{urlencode({'version': saved})}")
    history = _history(session, memory, version=saved)
    notice = (
        f"Saved your text as version {saved} (restoring version {restored})."
        if edited
        else f"Restored version {restored} as version {saved}."
    )
    return render(
        request, f"{TEMPLATE}#main", {**_history_context(session, memory, history), "notice": notice}
    )


def _restore_editor(
    request: HtmxHttpRequest,
    session: AgentSession,
    memory: str,
    *,
    version: int,
    form: RestoreForm,
    status: int,
    conflict_version: int | None = None,
    conflict_text: str = "",
) -> HttpResponse:
    """The restore's editor in the page's restore slot: after a conflict (both texts), or with the
    error that stopped the save."""
    context = {
        **_page_context(session, memory),
        "form": form,
        "restore_url": _restore_url(session, memory, version),
        "conflict": conflict_version is not None,
        # The text field after a conflict, or when the operator's own text was refused.
        "show_field": conflict_version is not None or "content" in form.data,
        "conflict_version": conflict_version,
        "conflict_text": conflict_text,
    }
    response = render(request, f"{TEMPLATE}#restore-editor", context, status=status)
    return reswap(retarget(response, "#restore-editor"), "innerHTML")


def _conflict_form(text: str, current_version: int) -> RestoreForm:
    return RestoreForm(initial={"content": text, "base_version": current_version})


@require_POST
@operator_required
def notepad_restore(request: HtmxHttpRequest, session_id: uuid.UUID, version: int) -> HttpResponse:
    session = session_or_404(session_id)
    try:
        restored_text = notepad_selectors.notepad_at_version(session_id=session.pk, version=version).content
    except NotepadRevision.DoesNotExist:
        raise Http404("No such version of the notepad.") from None
    form = RestoreForm(request.POST)
    if not form.is_valid():
        return _restore_editor(request, session, NOTEPAD, version=version, form=form, status=422)
    edited = form.edited_text()
    base = form.cleaned_data["base_version"]
    if edited is None and base == version:
        form.add_error(None, f"Version {version} is the current text: there is nothing to restore.")
        return _restore_editor(request, session, NOTEPAD, version=version, form=form, status=422)
    text = restored_text if edited is None else edited
    try:
        revision = notepad_services.notepad_write(
            session_id=session.pk,
            content=text,
            author=operator_author(operator_name(request)),
            expected_version=base,
        )
    except notepad_services.NotepadConflict as conflict:
        return _restore_editor(
            request,
            session,
            NOTEPAD,
            version=version,
            form=_conflict_form(text, conflict.version),
            status=409,
            conflict_version=conflict.version,
            conflict_text=conflict.content,
        )
    except notepad_services.NotepadEditError as exc:
        form.add_error("content", str(exc))
        return _restore_editor(request, session, NOTEPAD, version=version, form=form, status=422)
    return _restored(
        request, session, NOTEPAD, restored=version, saved=revision.version, edited=edited is not None
    )


@require_POST
@operator_required
def scratchpad_restore(
    request: HtmxHttpRequest, session_id: uuid.UUID, space: str, version: int
) -> HttpResponse:
    session = session_or_404(session_id)
    memory = _memory_or_404(space)
    try:
        value = scratchpad_selectors.scratchpad_value_at_version(
            session_id=session.pk, space=memory, version=version
        )
    except ScratchpadRevision.DoesNotExist:
        raise Http404("No such version of this space.") from None
    form = RestoreForm(request.POST)
    if not form.is_valid():
        return _restore_editor(request, session, memory, version=version, form=form, status=422)
    edited = form.edited_text()
    base = form.cleaned_data["base_version"]
    if edited is None and base == version:
        form.add_error(None, f"Version {version} is the current value: there is nothing to restore.")
        return _restore_editor(request, session, memory, version=version, form=form, status=422)
    if edited is not None:
        # The editor shows refs one a line, as the space's own editor does.
        value = (
            [line.strip() for line in edited.split("\n") if line.strip()]
            if memory == ScratchpadSpace.REFS
            else edited
        )
    try:
        change = scratchpad_services.scratchpad_space_set(
            session_id=session.pk,
            space=memory,
            value=value,
            author=operator_author(operator_name(request)),
            expected_version=base,
        )
    except scratchpad_services.ScratchpadConflict as conflict:
        return _restore_editor(
            request,
            session,
            memory,
            version=version,
            form=_conflict_form(selectors.space_text(value), conflict.current_version),
            status=409,
            conflict_version=conflict.current_version,
            conflict_text=selectors.space_text(conflict.current_value),
        )
    except scratchpad_services.ScratchpadInvalidValue as exc:
        form.add_error("content", str(exc))
        return _restore_editor(request, session, memory, version=version, form=form, status=422)
    return _restored(
        request, session, memory, restored=version, saved=change.version, edited=edited is not None
    )
