"""The scratchpad's views on the dashboard: a space's editor, under the notepad's conflict rule."""

from __future__ import annotations

import uuid
from typing import Any

from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from memory_app.scratchpad import services as scratchpad_services
from memory_app.scratchpad.dashboard.forms import ScratchpadSpaceForm
from memory_app.scratchpad.dashboard.panels import TEMPLATE
from memory_app.scratchpad.dashboard.selectors import scratchpad_spaces, space_text
from memory_app.scratchpad.models import ScratchpadSpace
from sessions_app.authors import operator_author
from sessions_app.dashboard.auth import operator_required
from sessions_app.dashboard.views.common import HtmxHttpRequest, operator_name, session_or_404
from sessions_app.models import AgentSession


def _space_context(session: AgentSession, space: str) -> dict[str, Any]:
    spaces = scratchpad_spaces(session=session, only=space)
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
        return render(request, f"{TEMPLATE}#editor", {**context, "form": form})
    form = ScratchpadSpaceForm(request.POST)
    if not form.is_valid() or form.cleaned_data["space"] != space:
        return render(request, f"{TEMPLATE}#editor", {**context, "form": form}, status=422)
    try:
        scratchpad_services.scratchpad_space_set(
            session_id=session.pk,
            space=space,
            value=form.space_value(),
            author=operator_author(operator_name(request)),
            expected_version=form.cleaned_data["base_version"],
        )
    except scratchpad_services.ScratchpadConflict as conflict:
        form = ScratchpadSpaceForm(
            initial={
                "space": space,
                "value": form.cleaned_data["value"],
                "base_version": conflict.current_version,
            }
        )
        return render(
            request,
            f"{TEMPLATE}#editor",
            {
                **context,
                "form": form,
                "conflict": conflict,
                "conflict_text": space_text(conflict.current_value),
            },
            status=409,
        )
    except scratchpad_services.ScratchpadInvalidValue as exc:
        form.add_error("value", str(exc))
        return render(request, f"{TEMPLATE}#editor", {**context, "form": form}, status=422)
    return render(request, f"{TEMPLATE}#saved", _space_context(session, space))
