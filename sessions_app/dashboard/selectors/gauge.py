"""The context gauge: how full the next request will be, section by section."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db.models import Sum
from django.db.models.functions import Coalesce

from memory_app.tasks.selectors import tasks_tokens_saved
from sessions_app.engine.compaction import budget
from sessions_app.engine.context import build_request
from sessions_app.engine.features import features
from sessions_app.models import AgentSession, Message


@dataclass(frozen=True)
class GaugePart:
    key: str
    label: str
    tokens: int
    percent: float  # of the context window
    share: float  # of the estimated prompt


@dataclass(frozen=True)
class ContextGauge:
    parts: list[GaugePart]
    estimated_tokens: int
    threshold_tokens: int
    window: int
    last_prompt_tokens: int | None
    token_ratio: float
    # Tokens of the history that finished tasks keep out of requests (task scoping's collapse).
    collapsed_tokens: int = 0

    @property
    def estimated_percent(self) -> float:
        return min(100.0, 100.0 * self.estimated_tokens / self.window)

    @property
    def threshold_percent(self) -> float:
        return 100.0 * self.threshold_tokens / self.window

    @property
    def over_threshold(self) -> bool:
        return self.estimated_tokens > self.threshold_tokens


GAUGE_LABELS = {
    "system": "System",
    "notepad": "Notepad",
    "scratchpad": "Scratchpad",
    "history": "History",
    "tools": "Tools",
}


def apportion(total: int, weights: dict[str, int]) -> dict[str, int]:
    """`total` split in proportion to `weights`, in whole tokens that add up to `total` exactly
    (largest remainders get the rounding), so the gauge's rows sum to its estimate."""
    weight = sum(weights.values())
    if weight <= 0:
        return dict.fromkeys(weights, 0)
    exact = {key: total * w / weight for key, w in weights.items()}
    shares = {key: int(value) for key, value in exact.items()}
    by_remainder = sorted(weights, key=lambda key: exact[key] - shares[key], reverse=True)
    for key in by_remainder[: total - sum(shares.values())]:
        shares[key] += 1
    return shares


def context_gauge(*, session: AgentSession) -> ContextGauge:
    """The next request's estimated prompt tokens, split by section, against threshold and window.

    The request is built as the engine builds it (the same context sections and tools), except
    that the history's tokens are the sum of its messages' stored estimates (one aggregate, never
    the whole history loaded). The local counts are scaled so that they add up to the calibrated
    estimate compaction decides on (`budget.estimate_prompt_tokens`: the provider's count of
    the previous prompt plus the session's token ratio times what changed).
    """
    snapshot = features().snapshot(session)
    built = build_request(
        session=snapshot,
        history=[],
        server_tools=features().tools_for_session(snapshot),
        sections=features().sections,
        max_tokens=settings.PALIMPSEST_MAX_OUTPUT_TOKENS,
    )
    history = Message.objects.filter(session_id=session.pk, epoch=session.epoch).aggregate(
        total=Coalesce(Sum("token_estimate"), 0)
    )["total"]
    collapsed = min(history, tasks_tokens_saved(session_id=session.pk, epoch=session.epoch))
    history -= collapsed
    # The notepad's and scratchpad's rows are the memory they show on this call; their guidance
    # (and every other feature's) is stable system text, counted under System.
    notepad = built.sections.get("notepad", 0)
    scratchpad = built.sections.get("scratchpad", 0)
    prompt_text = built.breakdown["system"] + built.breakdown["dynamic_system"] + built.breakdown["transient"]
    local = {
        "system": prompt_text - notepad - scratchpad,
        "notepad": notepad,
        "scratchpad": scratchpad,
        "history": history,
        "tools": built.breakdown["tools"],
    }
    local_total = sum(local.values())
    estimated = budget.estimate_prompt_tokens(snapshot, local_total)
    scaled = apportion(estimated, local)
    window = max(1, session.context_window)
    parts = [
        GaugePart(
            key,
            GAUGE_LABELS[key],
            scaled[key],
            100.0 * scaled[key] / window,
            100.0 * tokens / local_total if local_total else 0.0,
        )
        for key, tokens in local.items()
    ]
    scale = estimated / local_total if local_total else snapshot.token_ratio
    return ContextGauge(
        parts=parts,
        estimated_tokens=estimated,
        threshold_tokens=budget.threshold_tokens(snapshot),
        window=window,
        last_prompt_tokens=session.last_prompt_tokens,
        token_ratio=session.token_ratio,
        collapsed_tokens=round(collapsed * scale),
    )
