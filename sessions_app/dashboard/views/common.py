"""What every dashboard view shares: the request type and the session an operator named."""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest
from django_htmx.middleware import HtmxDetails

from sessions_app.dashboard import selectors
from sessions_app.models import AgentSession


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


def session_or_404(session_id: Any) -> AgentSession:
    try:
        return selectors.session_get_for_operator(session_id=session_id)
    except selectors.NotFound:
        raise Http404("No such session.") from None


def operator_name(request: HtmxHttpRequest) -> str:
    return request.user.get_username()
