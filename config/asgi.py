"""ASGI entry point: HTTP through Django, websockets through Channels."""

from __future__ import annotations

import os

from django.conf import settings
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
# Django must be set up before consumers (and the models they import) are loaded.
django_asgi_app = get_asgi_application()
# The dashboard's and the admin's CSS and scripts, served by daphne itself (as runserver does).
http_application = (
    ASGIStaticFilesHandler(django_asgi_app) if settings.PALIMPSEST_SERVE_STATIC else django_asgi_app
)

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from sessions_app.agent_ws.security import browser_origin_validator  # noqa: E402
from sessions_app.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": http_application,
        # Agent clients authenticate with their bearer token inside the consumer; the auth stack
        # gives dashboard sockets the logged-in operator. Channels' AllowedHostsOriginValidator
        # would refuse every client without an Origin header, i.e. every non-browser agent client,
        # so ours checks Origin only when a browser sends one (browsers always do).
        "websocket": browser_origin_validator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)

from config.server_process import server_process_ready  # noqa: E402

server_process_ready()
