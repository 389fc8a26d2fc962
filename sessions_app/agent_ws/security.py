"""Origin checking for websockets that also serve non-browser clients."""

from __future__ import annotations

from typing import Any

from channels.security.websocket import OriginValidator
from django.conf import settings


class BrowserOriginValidator(OriginValidator):
    """Like Channels' AllowedHostsOriginValidator, but a connection without an Origin header passes.

    Browsers always send Origin on a websocket handshake, so cross-site pages are still refused;
    agent clients (which send none) authenticate with their bearer token instead.
    """

    def valid_origin(self, parsed_origin: Any) -> bool:
        if parsed_origin is None:
            return True
        return super().valid_origin(parsed_origin)


def browser_origin_validator(application: Any) -> BrowserOriginValidator:
    allowed_hosts = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed_hosts:
        allowed_hosts = ["localhost", "127.0.0.1", "[::1]"]
    return BrowserOriginValidator(application, allowed_hosts)
