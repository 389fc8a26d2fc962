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
    compaction_failures: int = 0
    # Where the session sits in its tree of sub-sessions: 0 and no parent for a root (whose
    # `root_id` is its own id).
    depth: int = 0
    parent_id: uuid.UUID | None = None
    root_id: uuid.UUID | None = None
    # The notepad's content as read with the row ("" while empty), which every request shows:
    # its section need not read it again. None unless the snapshot was made from a row read
    # just now (`from_session(..., with_notepad=True)`): the section then reads it itself.
    notepad: str | None = None
    # `setting`'s answers, by path: a request's build asks two dozen of them (each feature's
    # `enabled`, its limits). Not copied by `dataclasses.replace`, which may change `settings`.
    _settings_read: dict[tuple[str, ...], Any] = field(
        init=False, default_factory=dict, repr=False, compare=False
    )

    @classmethod
    def from_session(cls, session: Any, *, with_notepad: bool = False) -> SessionSnapshot:
        """The snapshot of `session`. `with_notepad`: the caller read the row just now, in the
        call that builds the request, so its notepad is the current one (the engine's steps);
        a row kept for longer (a view's, a form's) may hold an older notepad than the database."""
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
            compaction_failures=session.compaction_failures,
            depth=session.depth,
            parent_id=session.parent_session_id,
            root_id=session.root_session_id or session.id,
            # Read with the row, not deferred (`get_deferred_fields` walks every field).
            notepad=(session.notepad or "") if with_notepad and "notepad" in vars(session) else None,
        )

    def setting(self, *path: str) -> Any:
        """The session's setting at `path` (e.g. "notepad", "enabled"); where the stored settings
        lack it (a session created before the setting existed), the features' default."""
        try:
            return self._settings_read[path]
        except KeyError:
            pass
        from sessions_app.engine.features import features

        for tree in (self.settings, features().default_settings):
            value: Any = tree
            for key in path:
                if not isinstance(value, dict) or key not in value:
                    break
                value = value[key]
            else:
                self._settings_read[path] = value
                return value
        raise KeyError(f"no setting {'.'.join(path)}")
