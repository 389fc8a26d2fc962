from __future__ import annotations

from django.apps import AppConfig


class MemoryAppConfig(AppConfig):
    name = "memory_app"
    verbose_name = "Agent memory"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Memory features register their tools, context sections and scripted-model rules here.
        # -- scratchpad spaces (seed 003) --
        import memory_app.scratchpad_scripted
        import memory_app.scratchpad_sections
        import memory_app.tools.scratchpad  # noqa: F401
