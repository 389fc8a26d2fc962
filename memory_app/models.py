"""The memory app's models. Each feature keeps its models in its own module; they are imported
here so that Django registers them."""

from __future__ import annotations

from memory_app.scratchpad_models import Scratchpad, ScratchpadRevision, ScratchpadSpace

__all__ = ["Scratchpad", "ScratchpadRevision", "ScratchpadSpace"]
