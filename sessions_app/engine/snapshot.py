"""The read-only view of a session that the engine, tools and context sections work from."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class SessionSnapshot:
    id: uuid.UUID
    model: str
    system_prompt: str
    context_window: int
    compact_threshold: float
    settings: dict[str, Any]
    client_tools: list[dict] = field(default_factory=list)
    epoch: int = 0
    last_prompt_tokens: int | None = None
    last_estimated_tokens: int | None = None
    token_ratio: float = 1.0

    @classmethod
    def from_session(cls, session: Any) -> SessionSnapshot:
        return cls(
            id=session.id,
            model=session.model,
            system_prompt=session.system_prompt,
            context_window=session.context_window,
            compact_threshold=session.compact_threshold,
            settings=session.settings,
            client_tools=list(session.client_tools or []),
            epoch=session.epoch,
            last_prompt_tokens=session.last_prompt_tokens,
            last_estimated_tokens=session.last_estimated_tokens,
            token_ratio=session.token_ratio,
        )

    def setting(self, *path: str, default: Any = None) -> Any:
        value: Any = self.settings
        for key in path:
            if not isinstance(value, dict) or key not in value:
                return default
            value = value[key]
        return value
