"""Observations as the dashboard shows them, composed from the feature's own selectors."""

from __future__ import annotations

import uuid
from typing import Any

from memory_app.observations import selectors as observation_selectors
from memory_app.observations.models import Observation
from sessions_app.dashboard.selectors import NotFound

OBSERVATIONS_SHOWN = 50


def observations_of(*, session_id: uuid.UUID, limit: int = OBSERVATIONS_SHOWN) -> list[Observation]:
    return observation_selectors.observations_latest(session_id=session_id, limit=limit)


def observation_get_for_operator(*, session_id: uuid.UUID, observation_id: Any) -> Observation:
    """The session's observation `observation_id`; `NotFound` for a bad or foreign id."""
    observation = observation_selectors.observation_get_for_session(
        session_id=session_id, observation_id=observation_id
    )
    if observation is None:
        raise NotFound
    return observation
