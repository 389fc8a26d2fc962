"""What is recorded of each model call (`ModelCallData`): the request's compact record and hash,
its size and stable prefix, the estimates, the timings, the response and its usage."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from sessions_app import selectors
from sessions_app.common.estimate import estimate_text_tokens
from sessions_app.common.types import ModelCallData
from sessions_app.engine.context import BuiltRequest
from sessions_app.engine.contract import SessionSnapshot
from sessions_app.engine.providers.base import ModelResponse


@dataclass
class TurnCall:
    """A turn's model call, from the moment it is sent: `answered` or `failed` gives its record."""

    provider: str
    snapshot: SessionSnapshot
    step: int
    built: BuiltRequest
    stable_prefix_bytes: int
    predicted_prompt_tokens: int
    started_at: datetime = field(default_factory=timezone.now)
    t0: float = field(default_factory=time.monotonic)

    def _base(self) -> dict[str, Any]:
        encoded = self.built.encoded
        return {
            "provider": self.provider,
            "model": self.snapshot.model,
            "step": self.step,
            "purpose": "turn",
            "request_record": self.built.record,
            "request_parts": self.built.parts,
            # `encoded` is the canonical JSON of the body: this is `selectors.request_sha256(body)`.
            "request_sha256": self.built.sha256,
            "request_bytes": len(encoded),
            "stable_prefix_bytes": self.stable_prefix_bytes,
            "estimated_prompt_tokens": self.built.estimated_tokens,
            "predicted_prompt_tokens": self.predicted_prompt_tokens,
            "started_at": self.started_at,
            "duration_ms": int((time.monotonic() - self.t0) * 1000),
        }

    def answered(self, response: ModelResponse) -> ModelCallData:
        return ModelCallData(
            **self._base(),
            first_token_ms=response.first_token_ms,
            response={"content": response.content, "stop_reason": response.stop_reason, **response.raw},
            stop_reason=response.stop_reason,
            usage=response.usage.as_dict(),
        )

    def failed(self, error: str) -> ModelCallData:
        return ModelCallData(
            **self._base(), first_token_ms=None, response=None, stop_reason="", usage={}, error=error
        )


def summary_call_data(
    *, provider: str, step: int, body: dict, response: ModelResponse, purpose: str, duration_ms: int
) -> ModelCallData:
    """The record of a compaction summary call (its body is recorded whole)."""
    encoded = selectors.request_canonical_bytes(body)
    return ModelCallData(
        provider=provider,
        model=body["model"],
        step=step,
        purpose=purpose,
        request_record=body,
        request_sha256=selectors.request_sha256(body),
        request_bytes=len(encoded),
        stable_prefix_bytes=0,
        estimated_prompt_tokens=estimate_text_tokens(encoded.decode()),
        started_at=timezone.now() - timedelta(milliseconds=duration_ms),
        duration_ms=duration_ms,
        first_token_ms=None,
        response={"content": response.content, "stop_reason": response.stop_reason},
        stop_reason=response.stop_reason,
        usage=response.usage.as_dict(),
    )


def summary_call_built_data(
    *,
    provider: str,
    step: int,
    built: BuiltRequest,
    response: ModelResponse,
    duration_ms: int,
) -> ModelCallData:
    """The record of a summary call in the session's layout (`compaction.summary_call: "shared"`):
    like a turn's, its record names the stored messages it sent by position. Its stable prefix is
    not measured (its `max_tokens` differs from the turn's, and the canonical bytes start with
    it): the prompt inspector compares its blocks with the turn's call before it."""
    return ModelCallData(
        provider=provider,
        model=built.body["model"],
        step=step,
        purpose="summary",
        request_record=built.record,
        request_parts=built.parts,
        request_sha256=built.sha256,
        request_bytes=len(built.encoded),
        stable_prefix_bytes=0,
        estimated_prompt_tokens=built.estimated_tokens,
        started_at=timezone.now() - timedelta(milliseconds=duration_ms),
        duration_ms=duration_ms,
        first_token_ms=response.first_token_ms,
        response={"content": response.content, "stop_reason": response.stop_reason, **response.raw},
        stop_reason=response.stop_reason,
        usage=response.usage.as_dict(),
    )
