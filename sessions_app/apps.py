from __future__ import annotations

from django.apps import AppConfig


class SessionsAppConfig(AppConfig):
    """Sessions, turns, messages, events and the engine. Nothing is wired here: the features are
    listed in `settings.PALIMPSEST_FEATURES`, the announcer in `settings.PALIMPSEST_ANNOUNCER`."""

    name = "sessions_app"
    verbose_name = "Agent sessions"
    default_auto_field = "django.db.models.BigAutoField"
