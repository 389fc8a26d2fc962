"""The context gauge: how full the next request will be, section by section.

Its rows are System, then each feature's `GaugeRow` (a context section's per-call tokens), in
feature order, then History and Tools; history a feature keeps out of requests
(`HistorySaving`) is taken off History and shown apart."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings
from django.db.models import Sum
from django.db.models.functions import Coalesce

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
class SavedTokens:
    label: str
    tokens: int


@dataclass(frozen=True)
class ContextGauge:
    parts: list[GaugePart]
    estimated_tokens: int
    threshold_tokens: int
    window: int
    last_prompt_tokens: int | None
    token_ratio: float
    # Tokens of the history that features keep out of requests (their `HistorySaving`).
    saved: list[SavedTokens] = field(default_factory=list)

    @property
    def estimated_percent(self) -> float:
        return min(100.0, 100.0 * self.estimated_tokens / self.window)

    @property
    def threshold_percent(self) -> float:
        return 100.0 * self.threshold_tokens / self.window

    @property
    def over_threshold(self) -> bool:
        return self.estimated_tokens > self.threshold_tokens


SYSTEM, HISTORY, TOOLS = "system", "history", "tools"
GAUGE_LABELS = {SYSTEM: "System", HISTORY: "History", TOOLS: "Tools"}


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
    feature_set = features()
    snapshot = feature_set.snapshot(session)
    built = build_request(
        session=snapshot,
        history=[],
        server_tools=feature_set.tools_for_session(snapshot),
        sections=feature_set.sections,
        max_tokens=settings.PALIMPSEST_MAX_OUTPUT_TOKENS,
    )
    history = Message.objects.filter(session_id=session.pk, epoch=session.epoch).aggregate(
        total=Coalesce(Sum("token_estimate"), 0)
    )["total"]
    saved: list[tuple[str, int]] = []
    for saving in feature_set.history_savings:
        tokens = min(history, saving.tokens(session.pk, session.epoch))
        history -= tokens
        saved.append((saving.label, tokens))
    # A feature's row is the memory its section shows on this call; its guidance (and every
    # other feature's) is stable system text, counted under System.
    shown = {row.section: built.sections.get(row.section, 0) for row in feature_set.gauge_rows}
    labels = {**GAUGE_LABELS, **{row.section: row.label for row in feature_set.gauge_rows}}
    prompt_text = built.breakdown["system"] + built.breakdown["dynamic_system"] + built.breakdown["transient"]
    local = {
        SYSTEM: prompt_text - sum(shown.values()),
        **shown,
        HISTORY: history,
        TOOLS: built.breakdown["tools"],
    }
    local_total = sum(local.values())
    estimated = budget.estimate_prompt_tokens(snapshot, local_total)
    scaled = apportion(estimated, local)
    window = max(1, session.context_window)
    parts = [
        GaugePart(
            key,
            labels[key],
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
        saved=[SavedTokens(label, round(tokens * scale)) for label, tokens in saved],
    )
