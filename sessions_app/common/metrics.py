"""What an operator scrapes at `/metrics` (issue 36 item 6; docs/deploy.md, "Metrics"): the counters and
histograms of what happens, incremented where it happens, after its write commits.

Every writer may import this module (it is on the neutral floor: it imports nothing of the
project). Each function here is called once per event by the one place that records it:

- `model_call_observed`: `services.steps` (a model call's record: a turn's step, a summary, a
  failed call), with its latency, tokens and estimated cost
- `turn_ended`: `services.turns.turn_close` and the turn's last step (`services.steps`)
- `compaction_observed`: `services.archives` (a compaction stored, or a failure recorded)
- `tool_errors_observed`: `services.steps.tool_results_store`
- `budget_stopped`: the engine, when a budget stops a model call (`engine.budget_check`)

The state a scrape reports (sessions by status, approvals pending, the cache read share over all
calls) is read from the database at scrape time (`sessions_app.metrics_export`), not counted.

With `PROMETHEUS_MULTIPROC_DIR` set in the environment before the process starts, the
`prometheus-client` library keeps these values in files there, one per process, and a scrape of
any process sums them all (its multiprocess mode); without it each process has its own registry.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from prometheus_client import Counter, Histogram

logger = logging.getLogger("palimpsest.metrics")
F = TypeVar("F", bound=Callable[..., None])

PREFIX = "palimpsest"
# A model call's latency, in seconds: from a quick small call to a long streamed answer.
MODEL_CALL_BUCKETS = (0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, float("inf"))
# Tool names are labels up to this many distinct ones per process; later ones count as "other"
# (clients, agents and MCP servers name tools: a label must not grow without bound).
TOOL_LABELS_MAX = 200
OTHER_TOOL = "other"

TURNS = Counter(f"{PREFIX}_turns", "Turns ended, by stop reason.", ["stop_reason"])
MODEL_CALLS = Counter(
    f"{PREFIX}_model_calls",
    "Model calls made (a turn's steps, summaries), by provider, purpose and outcome (ok, error).",
    ["provider", "purpose", "outcome"],
)
MODEL_CALL_SECONDS = Histogram(
    f"{PREFIX}_model_call_duration_seconds",
    "How long each model call took, by provider and purpose.",
    ["provider", "purpose"],
    buckets=MODEL_CALL_BUCKETS,
)
INPUT_TOKENS = Counter(
    f"{PREFIX}_input_tokens",
    "Input tokens sent to models, by provider and kind (uncached, cache_write, cache_read).",
    ["provider", "kind"],
)
OUTPUT_TOKENS = Counter(f"{PREFIX}_output_tokens", "Output tokens models wrote, by provider.", ["provider"])
COST_USD = Counter(
    f"{PREFIX}_cost_usd",
    "Estimated cost of model calls in USD at the price table's prices (PALIMPSEST_MODEL_PRICES), "
    "by provider.",
    ["provider"],
)
COMPACTIONS = Counter(
    f"{PREFIX}_compactions",
    "Compactions, by trigger (threshold, operator, ...), kind (history, turn) and outcome "
    "(completed, failed).",
    ["trigger", "kind", "outcome"],
)
TOOL_ERRORS = Counter(f"{PREFIX}_tool_errors", "Tool calls whose result was an error, by tool.", ["tool"])
BUDGET_STOPS = Counter(
    f"{PREFIX}_budget_stops",
    "Model calls not made because a budget was reached, by limit (max_cost_usd, max_input_tokens, "
    "max_output_tokens).",
    ["limit"],
)


def _never_raises(function: F) -> F:
    """Counting is never why a write fails: the functions run in `on_commit` callbacks, where an
    exception would reach the turn that committed (a multiprocess directory that went missing,
    a full disk). It is logged instead."""

    @functools.wraps(function)
    def counted(*args: Any, **kwargs: Any) -> None:
        try:
            function(*args, **kwargs)
        except Exception:
            logger.warning("a metric could not be counted (%s)", function.__name__, exc_info=True)

    return counted  # type: ignore[return-value]


_tool_labels: set[str] = set()
_tool_labels_lock = threading.Lock()


def _tool_label(name: str) -> str:
    with _tool_labels_lock:
        if name in _tool_labels:
            return name
        if len(_tool_labels) < TOOL_LABELS_MAX:
            _tool_labels.add(name)
            return name
    return OTHER_TOOL


@_never_raises
def model_call_observed(
    *,
    provider: str,
    purpose: str,
    failed: bool,
    duration_seconds: float,
    uncached: int,
    cache_write: int,
    cache_read: int,
    output: int,
    cost_usd: float | None,
) -> None:
    MODEL_CALLS.labels(provider, purpose, "error" if failed else "ok").inc()
    MODEL_CALL_SECONDS.labels(provider, purpose).observe(max(duration_seconds, 0.0))
    for kind, tokens in (("uncached", uncached), ("cache_write", cache_write), ("cache_read", cache_read)):
        if tokens:
            INPUT_TOKENS.labels(provider, kind).inc(tokens)
    if output:
        OUTPUT_TOKENS.labels(provider).inc(output)
    if cost_usd:
        COST_USD.labels(provider).inc(cost_usd)


@_never_raises
def turn_ended(*, stop_reason: str) -> None:
    TURNS.labels(stop_reason or "unknown").inc()


@_never_raises
def compaction_observed(*, trigger: str, kind: str, completed: bool) -> None:
    COMPACTIONS.labels(trigger or "unknown", kind or "unknown", "completed" if completed else "failed").inc()


@_never_raises
def tool_errors_observed(*, names: Iterable[str]) -> None:
    for name in names:
        TOOL_ERRORS.labels(_tool_label(name)).inc()


@_never_raises
def budget_stopped(*, limit: str) -> None:
    BUDGET_STOPS.labels(limit).inc()
