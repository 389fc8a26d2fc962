"""The history pages of a memory a feature keeps every version of (`FeatureDashboard.histories`):
its changes, a line diff of any change against the one before it or against the current text,
and "restore this version". A feature's views describe the memory (`HistoryPages`) and answer
with `history_page` and `history_restore`.

A restore is the operator's edit: the feature's own save, with the version the operator saw as
current. If the memory changed since (the agent wrote meanwhile), nothing is overwritten and the
conflict editor shows both texts, its base moved to the current version.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django_htmx.http import reswap, retarget

from sessions_app.dashboard import panels, selectors
from sessions_app.dashboard.history_forms import HistoryQueryForm, RestoreForm
from sessions_app.dashboard.views.common import HtmxHttpRequest
from sessions_app.models import AgentSession

TEMPLATE = "dashboard/memory_history.html"


@dataclass(frozen=True)
class HistoryPages:
    """One memory's history pages, as the feature's views describe them."""

    memory: str  # its name among the features' histories
    what: str  # as the pages' texts name it ("the {what} changed while you were editing")
    tab: str  # the session page's tab that shows it (the pages lead back there)
    # The history as a page's query asks for it (`version`, `at`, `against`, `before`): the
    # feature's selector, which raises `selectors.NotFound` for a version never written.
    history: Callable[..., selectors.MemoryHistory]
    restore_url: Callable[[int], str]  # the URL that restores a version
    # What a version holds, as the refusal to restore the current one names it.
    holds: str = "text"


class RestoreConflict(Exception):
    """The memory is no longer at the version the operator saw: its version and text now."""

    def __init__(self, version: int, text: str) -> None:
        super().__init__(version, text)
        self.version = version
        self.text = text


class RestoreRefused(Exception):
    """The memory does not take the text (over its limit, say): the message says why."""


def _page_context(session: AgentSession, pages: HistoryPages) -> dict[str, Any]:
    memories = panels.memory_history_links(session.pk)
    return {
        "session": session,
        "memory": pages.memory,
        "what": pages.what,
        "tab": pages.tab,
        "history_url": dict(memories)[pages.memory],
        "memories": memories,
    }


def _history_context(
    session: AgentSession, pages: HistoryPages, history: selectors.MemoryHistory
) -> dict[str, Any]:
    return {
        **_page_context(session, pages),
        "history": history,
        "restore_url": pages.restore_url(history.selected_version),
        "older_query": urlencode(
            {"version": history.selected_version, "against": history.against, "before": history.older_before}
        ),
    }


def history_page(request: HtmxHttpRequest, session: AgentSession, pages: HistoryPages) -> HttpResponse:
    """The history page, with the change and the comparison the query asks for."""
    form = HistoryQueryForm(request.GET)
    if not form.is_valid():
        context = {**_page_context(session, pages), "query_errors": form.error_lines()}
        return render(request, TEMPLATE, context, status=400)
    try:
        history = pages.history(**form.query())
    except selectors.NotFound:
        raise Http404(f"No such version of the {pages.memory}.") from None
    return render(request, TEMPLATE, _history_context(session, pages, history))


def history_restore(
    request: HtmxHttpRequest,
    session: AgentSession,
    pages: HistoryPages,
    *,
    version: int,
    text: str,
    save: Callable[[str, int], int],
) -> HttpResponse:
    """Restore version `version` of the memory, whose text is `text` (or the operator's own text,
    after a conflict). `save(text, base_version)` writes a text as the operator, through the
    feature's service, and returns the new version; it raises `RestoreConflict` when the memory
    is no longer at `base_version`, `RestoreRefused` when it does not take the text."""
    form = RestoreForm(request.POST)
    if not form.is_valid():
        return _restore_editor(request, session, pages, version=version, form=form, status=422)
    edited = form.edited_text()
    base = form.cleaned_data["base_version"]
    if edited is None and base == version:
        form.add_error(None, f"Version {version} is the current {pages.holds}: there is nothing to restore.")
        return _restore_editor(request, session, pages, version=version, form=form, status=422)
    chosen = text if edited is None else edited
    try:
        saved = save(chosen, base)
    except RestoreConflict as conflict:
        return _restore_editor(
            request,
            session,
            pages,
            version=version,
            form=RestoreForm(initial={"content": chosen, "base_version": conflict.version}),
            status=409,
            conflict_version=conflict.version,
            conflict_text=conflict.text,
        )
    except RestoreRefused as exc:
        form.add_error("content", str(exc))
        return _restore_editor(request, session, pages, version=version, form=form, status=422)
    return _restored(request, session, pages, restored=version, saved=saved, edited=edited is not None)


def _restored(
    request: HtmxHttpRequest,
    session: AgentSession,
    pages: HistoryPages,
    *,
    restored: int,
    saved: int,
    edited: bool,
) -> HttpResponse:
    """After a restore: the history with the new change selected (a page load without htmx)."""
    if not request.htmx:
        history_url = _page_context(session, pages)["history_url"]
        return redirect(f"{history_url}?{urlencode({'version': saved})}")
    history = pages.history(version=saved)
    notice = (
        f"Saved your text as version {saved} (restoring version {restored})."
        if edited
        else f"Restored version {restored} as version {saved}."
    )
    return render(
        request, f"{TEMPLATE}#main", {**_history_context(session, pages, history), "notice": notice}
    )


def _restore_editor(
    request: HtmxHttpRequest,
    session: AgentSession,
    pages: HistoryPages,
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
        **_page_context(session, pages),
        "form": form,
        "restore_url": pages.restore_url(version),
        "conflict": conflict_version is not None,
        # The text field after a conflict, or when the operator's own text was refused.
        "show_field": conflict_version is not None or "content" in form.data,
        "conflict_version": conflict_version,
        "conflict_text": conflict_text,
    }
    response = render(request, f"{TEMPLATE}#restore-editor", context, status=status)
    return reswap(retarget(response, "#restore-editor"), "innerHTML")
