"""Django's admin autodiscovery imports this module: it names each feature's admin, so their
model admins are registered with the admin site (Django's own registry)."""

from __future__ import annotations

from memory_app.notepad import admin as notepad_admin
from memory_app.observations import admin as observations_admin
from memory_app.scratchpad import admin as scratchpad_admin
from memory_app.tasks import admin as tasks_admin

__all__ = ["notepad_admin", "observations_admin", "scratchpad_admin", "tasks_admin"]
