"""The memory app's models. Each feature keeps its models in its own module; they are imported
here so that Django registers them."""

from __future__ import annotations

from memory_app.observation_models import Observation, ObservationChunk, ObservationKind

__all__ = ["Observation", "ObservationChunk", "ObservationKind"]
