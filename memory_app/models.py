"""The agent's working memory: each feature keeps its models in its own package; Django finds
them here. Thin models: every change goes through the feature's `services`."""

from __future__ import annotations

from memory_app.notepad.models import NotepadOperation, NotepadRevision
from memory_app.observations.models import Observation, ObservationChunk, ObservationKind
from memory_app.scratchpad.models import Scratchpad, ScratchpadRevision, ScratchpadSpace
from memory_app.tasks.models import Task, TaskStatus

__all__ = [
    "NotepadOperation",
    "NotepadRevision",
    "Observation",
    "ObservationChunk",
    "ObservationKind",
    "Scratchpad",
    "ScratchpadRevision",
    "ScratchpadSpace",
    "Task",
    "TaskStatus",
]
