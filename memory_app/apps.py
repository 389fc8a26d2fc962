from __future__ import annotations

from django.apps import AppConfig


class MemoryAppConfig(AppConfig):
    name = "memory_app"
    verbose_name = "Agent memory"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Memory features register their tools, context sections and scripted-model rules here.
        # -- session notepad (seed 000) --
        from memory_app import scripted, sections  # noqa: F401
        from memory_app.notepad import SANDBOX_NAME, sandbox_notepad
        from memory_app.tools import count_words, notepad  # noqa: F401
        from sessions_app.engine.tools import SANDBOX_FACTORIES

        SANDBOX_FACTORIES[SANDBOX_NAME] = sandbox_notepad
        # -- scratchpad spaces (seed 003) --
        import memory_app.scratchpad_scripted
        import memory_app.scratchpad_sections
        import memory_app.tools.scratchpad  # noqa: F401

        # -- observations (seed 004): tools, engine hooks, scripted rules, admin --
        from memory_app import observation_admin, observation_hooks, observation_scripted  # noqa: F401
        from memory_app.tools import files, observations  # noqa: F401
