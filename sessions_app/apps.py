from __future__ import annotations

from django.apps import AppConfig


class SessionsAppConfig(AppConfig):
    name = "sessions_app"
    verbose_name = "Agent sessions"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Services announce committed events through one hook; the channel layer is plugged in
        # here so that the engine and services never import Channels themselves.
        from sessions_app import announce
        from sessions_app.channel_announcer import announce_via_channel_layer

        announce.set_announcer(announce_via_channel_layer)
        # Server tools and scripted-model rules of this app register themselves on import.
        from sessions_app import scripted_rules  # noqa: F401
        from sessions_app.tools import archive  # noqa: F401
