"""Tool approvals on the dashboard: the calls waiting for an answer across sessions (the
Approvals page), and an operator's answer, from that page or from the session's page
(`engine.approvals.tool_call_answer`, as a client's `tool.approve` / `tool.deny`)."""

from __future__ import annotations

import uuid

from asgiref.sync import sync_to_async
from django import forms
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe

from sessions_app import services
from sessions_app.authors import operator_author
from sessions_app.common.approvals import MAX_REASON_CHARS
from sessions_app.dashboard import selectors
from sessions_app.dashboard.auth import operator_required
from sessions_app.dashboard.views.common import HtmxHttpRequest, session_or_404
from sessions_app.engine import approvals as engine_approvals

WHERE_LIST = "list"
WHERE_SESSION = "session"


class ApprovalAnswerForm(forms.Form):
    tool_use_id = forms.CharField(max_length=128)
    decision = forms.ChoiceField(choices=[("approve", "approve"), ("deny", "deny")])
    reason = forms.CharField(required=False, max_length=MAX_REASON_CHARS)
    # The digest of the input the operator saw: the answer is refused if the call's input differs.
    input_sha256 = forms.CharField(required=False, max_length=64)
    where = forms.ChoiceField(
        choices=[(WHERE_LIST, WHERE_LIST), (WHERE_SESSION, WHERE_SESSION)], required=False
    )


@require_safe
@operator_required
def approvals_list(request: HtmxHttpRequest) -> HttpResponse:
    """Every call waiting for an approval (htmx, e.g. the page's refresh: the list alone)."""
    context = {"approvals": selectors.approvals_pending()}
    if not request.htmx:
        return render(request, "dashboard/approvals.html", context)
    return _with_badge(request, render(request, "dashboard/approvals.html#approval-list", context))


def _with_badge(request: HtmxHttpRequest, response: HttpResponse) -> HttpResponse:
    """`response` with the top bar's count of waiting calls swapped in too (htmx out of band)."""
    badge = render(request, "dashboard/_approvals_badge.html", {"oob": True})
    response.content = response.content + badge.content
    return response


@require_POST
@operator_required
async def approval_answer(request: HtmxHttpRequest, session_id: uuid.UUID) -> HttpResponse:
    """Approve or deny one of the session's waiting calls as the operator. htmx gets the box it came
    from back (the list, or the session page's), with what was wrong if it was refused (409);
    a plain form post is redirected to that page."""
    session = await sync_to_async(session_or_404)(session_id)
    form = ApprovalAnswerForm(request.POST)
    error = ""
    where = WHERE_LIST
    if not form.is_valid():
        error = "; ".join(
            f"{name}: {' '.join(str(e) for e in errors)}" for name, errors in form.errors.items()
        )
    else:
        where = form.cleaned_data["where"] or WHERE_LIST
        try:
            await engine_approvals.tool_call_answer(
                session_id=session.pk,
                tool_use_id=form.cleaned_data["tool_use_id"],
                approved=form.cleaned_data["decision"] == "approve",
                author=operator_author((await request.auser()).get_username()),
                reason=form.cleaned_data["reason"],
                expected_sha256=form.cleaned_data["input_sha256"] or None,
            )
        except (
            services.UnknownToolUse,
            services.ApprovalNotPending,
            services.ApprovalInputMismatch,
            services.ApprovalReasonTooLong,
        ) as exc:
            error = f"Not answered: {exc}."
    if not request.htmx:
        if where == WHERE_SESSION:
            return redirect(reverse("dashboard:session", args=[session.pk]))
        return redirect(reverse("dashboard:approvals"))
    if where == WHERE_SESSION:
        approvals = await sync_to_async(selectors.approvals_pending)(session_id=session.pk)
        template = "dashboard/approvals.html#session-approvals"
    else:
        approvals = await sync_to_async(selectors.approvals_pending)()
        template = "dashboard/approvals.html#approval-list"
    context = {"approvals": approvals, "approval_error": error, "session": session}
    response = await sync_to_async(render)(request, template, context, status=409 if error else 200)
    return await sync_to_async(_with_badge)(request, response)
