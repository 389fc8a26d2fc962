"""Who may use the dashboard: active staff users (operators)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from asgiref.sync import iscoroutinefunction
from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from django_htmx.http import HttpResponseClientRedirect


def is_operator(user: Any) -> bool:
    return bool(user is not None and user.is_authenticated and user.is_active and user.is_staff)


def _to_login(request: HttpRequest) -> HttpResponse:
    if getattr(request, "htmx", False):
        # An htmx request would swap the login page into a panel: send the whole page there.
        current = request.headers.get("HX-Current-URL") or request.get_full_path()
        return HttpResponseClientRedirect(f"{settings.LOGIN_URL}?{urlencode({'next': current})}")
    return redirect_to_login(request.get_full_path(), settings.LOGIN_URL)


def operator_required(view: Callable[..., Any]) -> Callable[..., Any]:
    """Let operators through; send anyone else to the login page (sync and async views)."""
    if iscoroutinefunction(view):

        @functools.wraps(view)
        async def async_wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if is_operator(await request.auser()):
                return await view(request, *args, **kwargs)
            return _to_login(request)

        return async_wrapper

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if is_operator(request.user):
            return view(request, *args, **kwargs)
        return _to_login(request)

    return wrapper
