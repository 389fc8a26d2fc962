"""Compaction's cheap tier: masking old tool results (like Anthropic's `clear_tool_uses` and
OpenHands' observation masking).

A masked result is kept whole by the feature that offers a result store (seed 004's observation
store: readable again with `scratchpad_read`) and every later request shows a short placeholder
naming its id and size instead; the stored message is untouched, the archive holds it in full.
No model call is made, and the prefix changes only where a result is masked.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sessions_app import services
from sessions_app.engine.context import PreparedHistory
from sessions_app.engine.contract import SessionSnapshot
from sessions_app.engine.feature_set import FeatureSet
from sessions_app.engine.prompts import MASKED_RESULT, MASKED_RESULT_UNSTORED

# A result whose placeholder would save fewer tokens than this is left alone.
MASK_MIN_SAVING_TOKENS = 40


@dataclass(frozen=True)
class Masked:
    tool_use_id: str
    observation_id: str
    size_chars: int
    tokens_saved: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "tool_use_id": self.tool_use_id,
            "observation_id": self.observation_id,
            "size_chars": self.size_chars,
            "tokens_saved": self.tokens_saved,
        }


def _text_size(content: Any) -> int:
    return len(content) if isinstance(content, str) else len(json.dumps(content, ensure_ascii=False))


def mask_candidates(history: PreparedHistory, *, keep_recent: int, from_position: int = -1) -> list[str]:
    """Unmasked tool results at or after `from_position`, oldest first, but the last `keep_recent`
    of the whole history, which stay whole."""
    results = history.tool_results()
    kept = {tool_use_id for tool_use_id, _ in results[len(results) - keep_recent :]} if keep_recent else set()
    return [
        tool_use_id
        for tool_use_id, position in results
        if position >= from_position and tool_use_id not in kept and tool_use_id not in history.masks
    ]


def results_mask(
    *,
    features: FeatureSet,
    session: SessionSnapshot,
    turn_id: uuid.UUID,
    history: PreparedHistory,
    tool_use_ids: Iterable[str],
    enough: int | None = None,
) -> list[Masked]:
    """Mask `tool_use_ids` in order (until `enough` tokens are saved, when given): store each
    result whole, record the mask (`MaskedResult`, under the turn's lease) and apply it to
    `history`. Runs in a DB thread. Raises `services.TurnLeaseLost` if the turn lost its lease."""
    masked: list[Masked] = []
    saved = 0
    for tool_use_id in tool_use_ids:
        if enough is not None and saved >= enough:
            break
        content = history.result_content(tool_use_id)
        size = _text_size(content)
        if size < MASK_MIN_SAVING_TOKENS * 4:
            continue
        observation_id = ""
        if features.result_store is not None:
            observation_id = features.result_store.store(
                session=session,
                turn_id=turn_id,
                tool_use_id=tool_use_id,
                tool_name=history.tool_names.get(tool_use_id, "tool"),
                content=content,
            )
        placeholder = (
            MASKED_RESULT.format(size=size, observation_id=observation_id)
            if observation_id
            else MASKED_RESULT_UNSTORED.format(size=size)
        )
        services.masked_result_store(
            session_id=session.id,
            turn_id=turn_id,
            epoch=history.epoch,
            tool_use_id=tool_use_id,
            observation_id=observation_id,
            size_chars=size,
            placeholder=placeholder,
        )
        tokens = history.mask(tool_use_id, placeholder)
        saved += tokens
        masked.append(Masked(tool_use_id, observation_id, size, tokens))
    return masked
