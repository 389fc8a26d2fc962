from __future__ import annotations

from django.apps import AppConfig


class MemoryAppConfig(AppConfig):
    """The agent's working memory: one package per feature (notepad/, scratchpad/, observations/),
    each exporting one `Feature` that `settings.PALIMPSEST_FEATURES` lists. Nothing is wired here."""

    name = "memory_app"
    verbose_name = "Agent memory"
    default_auto_field = "django.db.models.BigAutoField"
