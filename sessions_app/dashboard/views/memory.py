"""The memory panels: the notepad and a scratchpad space (each with its editor, under the
conflict rule), and the observations with their reader."""

from __future__ import annotations

import uuid
from typing import Any

from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods

from memory_app.notepad import selectors as notepad_selectors
from memory_app.notepad import services as notepad_services
from memory_app.notepad.models import NotepadRevision
from memory_app.observations.grep import observation_grep
from memory_app.observations.selectors import ObservationReadError, observation_read, observation_read_lines
from memory_app.scratchpad import services as scratchpad_services
from memory_app.scratchpad.models import ScratchpadSpace
from sessions_app.authors import operator_author
from sessions_app.dashboard import selectors
from sessions_app.dashboard.auth import operator_required
from sessions_app.dashboard.forms import NotepadForm, ObservationReadForm, ScratchpadSpaceForm
from sessions_app.dashboard.views.common import HtmxHttpRequest, operator_name, session_or_404
from sessions_app.models import AgentSession


# ---------------------------------------------------------------------------
# Notepad
# ---------------------------------------------------------------------------
@require_GET
@operator_required
def notepad_panel(request: HtmxHttpRequest, session_id: uuid.UUID) -> HttpResponse:
    session = session_or_404(session_id)
    return render(
        request,
        "dashboard/notepad.html#panel",
        {"session": session, **selectors.notepad_panel(session_id=session.pk)},
    )


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
        return render(request, "dashboard/notepad.html#editor", {"session": session, "form": form})
    form = NotepadForm(request.POST)
    if not form.is_valid():
        return render(
            request, "dashboard/notepad.html#editor", {"session": session, "form": form}, status=422
        )
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
        return render(request, "dashboard/notepad.html#editor", context, status=409)
    except notepad_services.NotepadEditError as exc:
        form.add_error("content", str(exc))
        return render(
            request, "dashboard/notepad.html#editor", {"session": session, "form": form}, status=422
        )
    context = {
        "session": session,
        "saved_version": revision.version,
        **selectors.notepad_panel(session_id=session.pk),
    }
    return render(request, "dashboard/notepad.html#saved", context)


@require_GET
@operator_required
def notepad_revision(request: HtmxHttpRequest, session_id: uuid.UUID, version: int) -> HttpResponse:
    session = session_or_404(session_id)
    try:
        state = notepad_selectors.notepad_at_version(session_id=session.pk, version=version)
    except NotepadRevision.DoesNotExist:
        raise Http404("No such version.") from None
    return render(request, "dashboard/notepad.html#revision", {"session": session, "state": state})


# ---------------------------------------------------------------------------
# Scratchpad spaces
# ---------------------------------------------------------------------------
def _space_context(session: AgentSession, space: str) -> dict[str, Any]:
    spaces = selectors.scratchpad_spaces(session=session, only=space)
    return {"session": session, "space": spaces[0]}


@require_http_methods(["GET", "POST"])
@operator_required
def scratchpad_edit(request: HtmxHttpRequest, session_id: uuid.UUID, space: str) -> HttpResponse:
    """One space's editor and its save, with the notepad's conflict rule."""
    session = session_or_404(session_id)
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
            author=operator_author(operator_name(request)),
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
    session = session_or_404(session_id)
    context = {"session": session, "observations": selectors.observations_of(session_id=session.pk)}
    return render(request, "dashboard/observations.html#list", context)


@require_GET
@operator_required
def observation_view(request: HtmxHttpRequest, session_id: uuid.UUID, observation_id: str) -> HttpResponse:
    """An observation and one read of it (head, tail, range, lines or grep), as the model reads."""
    session = session_or_404(session_id)
    try:
        observation = selectors.observation_get_for_operator(
            session_id=session.pk, observation_id=observation_id
        )
    except selectors.NotFound:
        raise Http404("No such observation in this session.") from None
    form = ObservationReadForm(request.GET or {"mode": "head"})
    result: dict[str, Any] | None = None
    error = ""
    if observation.expires_at <= timezone.now():
        # Retention dropped its content: only its summary and metadata are left to show.
        expired = f"{observation.expires_at:%Y-%m-%d %H:%M:%S %Z}"
        error = f"This observation expired {expired}; its content was dropped."
    elif form.is_valid():
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
