"""The session page's family block (its parent, root and sub-sessions), as a template tag so the
page's view needs no change: `{% load subsessions %}{% session_family session %}`."""

from __future__ import annotations

from typing import Any

from django import template

from sessions_app.dashboard.fragments import FAMILY_TEMPLATE, family_context
from sessions_app.models import AgentSession

register = template.Library()


@register.inclusion_tag(FAMILY_TEMPLATE)
def session_family(session: AgentSession) -> dict[str, Any]:
    return family_context(session)
