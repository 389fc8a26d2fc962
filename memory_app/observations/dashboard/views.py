"""The observations' views on the dashboard: the list, and an observation read as the model
reads it."""

from __future__ import annotations

import uuid
from typing import Any

from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_safe

from memory_app.observations.dashboard.forms import ObservationReadForm
from memory_app.observations.dashboard.panels import TEMPLATE
from memory_app.observations.dashboard.selectors import observation_get_for_operator, observations_of
from memory_app.observations.grep import observation_grep
from memory_app.observations.selectors import ObservationReadError, observation_read, observation_read_lines
from sessions_app.dashboard.auth import operator_required
from sessions_app.dashboard.selectors import NotFound
from sessions_app.dashboard.views.common import HtmxHttpRequest, session_or_404


@require_safe
@operator_required
def observation_list(request: HtmxHttpRequest, session_id: uuid.UUID) -> HttpResponse:
    session = session_or_404(session_id)
    context = {"session": session, "observations": observations_of(session_id=session.pk)}
    return render(request, f"{TEMPLATE}#list", context)


@require_safe
@operator_required
def observation_view(request: HtmxHttpRequest, session_id: uuid.UUID, observation_id: str) -> HttpResponse:
    """An observation and one read of it (head, tail, range, lines or grep), as the model reads."""
    session = session_or_404(session_id)
    try:
        observation = observation_get_for_operator(session_id=session.pk, observation_id=observation_id)
    except NotFound:
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
    return render(request, f"{TEMPLATE}#viewer", context)
