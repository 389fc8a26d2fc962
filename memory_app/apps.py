from __future__ import annotations

from django.apps import AppConfig


class MemoryAppConfig(AppConfig):
    name = "memory_app"
    verbose_name = "Agent memory"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Memory features register their tools, context sections and scripted-model rules here.
        # -- observations (seed 004): tools, engine hooks, scripted rules, admin --
        from memory_app import observation_admin, observation_hooks, observation_scripted  # noqa: F401
        from memory_app.tools import files, observations  # noqa: F401
