from __future__ import annotations

from django.contrib.admin.views.decorators import staff_member_required
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET


@require_GET
@staff_member_required
def index(request: HttpRequest) -> HttpResponse:
    # Operators work in the admin until the live dashboard lands at this address.
    return redirect("admin:sessions_app_agentsession_changelist")


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"ok": True})
