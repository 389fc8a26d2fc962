"""The scratchpad's views on the dashboard: a space's editor, under the notepad's conflict rule,
and each space's history pages (every change, diffs, restore)."""

from __future__ import annotations

import uuid
from typing import Any

from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from memory_app.scratchpad import selectors as scratchpad_selectors
from memory_app.scratchpad import services as scratchpad_services
from memory_app.scratchpad.dashboard import selectors as dashboard_selectors
from memory_app.scratchpad.dashboard.forms import ScratchpadSpaceForm, space_value
from memory_app.scratchpad.dashboard.panels import PANEL_NAME, TEMPLATE
from memory_app.scratchpad.models import ScratchpadRevision, ScratchpadSpace
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


def _space_context(session: AgentSession, space: str) -> dict[str, Any]:
    spaces = dashboard_selectors.scratchpad_spaces(session=session, only=space)
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
                "conflict_text": dashboard_selectors.space_text(conflict.current_value),
            },
            status=409,
        )
    except scratchpad_services.ScratchpadInvalidValue as exc:
        form.add_error("value", str(exc))
        return render(request, f"{TEMPLATE}#editor", {**context, "form": form}, status=422)
    return render(request, f"{TEMPLATE}#saved", _space_context(session, space))


# ---------------------------------------------------------------------------
# History
# ---------------------------------------------------------------------------
def _space_or_404(space: str) -> str:
    if space not in ScratchpadSpace.values:
        raise Http404("No such scratchpad space.")
    return space


def _history_pages(session: AgentSession, space: str) -> HistoryPages:
    return HistoryPages(
        memory=space,
        what=f"{space} space",
        tab=PANEL_NAME,
        history=lambda **query: dashboard_selectors.scratchpad_history(
            session_id=session.pk, space=space, **query
        ),
        restore_url=lambda version: reverse(
            "dashboard:scratchpad_restore", args=[session.pk, space, version]
        ),
        holds="value",
    )


@require_safe
@operator_required
def scratchpad_history(request: HtmxHttpRequest, session_id: uuid.UUID, space: str) -> HttpResponse:
    session = session_or_404(session_id)
    return history_page(request, session, _history_pages(session, _space_or_404(space)))


@require_POST
@operator_required
def scratchpad_restore(
    request: HtmxHttpRequest, session_id: uuid.UUID, space: str, version: int
) -> HttpResponse:
    session = session_or_404(session_id)
    space = _space_or_404(space)
    try:
        value = scratchpad_selectors.scratchpad_value_at_version(
            session_id=session.pk, space=space, version=version
        )
    except ScratchpadRevision.DoesNotExist:
        raise Http404("No such version of this space.") from None

    restored = dashboard_selectors.space_text(value)

    def save(text: str, base_version: int) -> int:
        try:
            change = scratchpad_services.scratchpad_space_set(
                session_id=session.pk,
                space=space,
                # The version's own value, or the operator's text after a conflict (refs one a
                # line, as the space's own editor shows them).
                value=value if text == restored else space_value(space, text),
                author=operator_author(operator_name(request)),
                expected_version=base_version,
            )
        except scratchpad_services.ScratchpadConflict as conflict:
            raise RestoreConflict(
                conflict.current_version, dashboard_selectors.space_text(conflict.current_value)
            ) from conflict
        except scratchpad_services.ScratchpadInvalidValue as exc:
            raise RestoreRefused(str(exc)) from exc
        return change.version

    pages = _history_pages(session, space)
    return history_restore(request, session, pages, version=version, text=restored, save=save)
