"""Sub-sessions on the session list: a root's tree, loaded when the operator opens it."""

from __future__ import annotations

import uuid

from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from sessions_app.dashboard import selectors
from sessions_app.dashboard.auth import operator_required
from sessions_app.dashboard.views.common import HtmxHttpRequest, session_or_404

TREE_TEMPLATE = "dashboard/_subsession_tree.html"


@require_safe
@operator_required
def subtree(request: HtmxHttpRequest, session_id: uuid.UUID) -> HttpResponse:
    root = session_or_404(session_id)
    rows, more = selectors.subsession_tree_shown(root_id=root.pk)
    return render(request, TREE_TEMPLATE, {"root": root, "rows": rows, "more": more})
