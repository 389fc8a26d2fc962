"""The `/metrics` exposition (docs/deploy.md, "Metrics"): the counters and histograms of
`sessions_app.common.metrics` (summed over every server process in prometheus-client's
multiprocess mode, `PROMETHEUS_MULTIPROC_DIR`), and the state read from the database at scrape
time by `StateCollector`: sessions by status, the cache read share over every recorded call, and
the approvals pending.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from django.db.models import Count, Sum
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from sessions_app import selectors
from sessions_app.common.metrics import PREFIX
from sessions_app.models import AgentSession, SessionStatus

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


class StateCollector(Collector):
    """Gauges of what the database holds now, read at each scrape (a few aggregate queries)."""

    def collect(self) -> Iterator[Metric]:
        by_status = dict(AgentSession.objects.values_list("status").annotate(n=Count("id")).order_by())
        sessions = GaugeMetricFamily(f"{PREFIX}_sessions", "Sessions, by status.", labels=["status"])
        for status in SessionStatus.values:
            sessions.add_metric([status], by_status.get(status, 0))
        yield sessions
        totals = AgentSession.objects.aggregate(
            uncached=Sum("usage_input_tokens"),
            written=Sum("usage_cache_creation_tokens"),
            read=Sum("usage_cache_read_tokens"),
        )
        read = totals["read"] or 0
        prompt = (totals["uncached"] or 0) + (totals["written"] or 0) + read
        if prompt:
            yield GaugeMetricFamily(
                f"{PREFIX}_cache_read_share",
                "Share of every input token sent so far (all sessions stored) that was read from the prompt "
                "cache; the counters' rate gives it over a window.",
                value=read / prompt,
            )
        yield GaugeMetricFamily(
            f"{PREFIX}_approvals_pending",
            "Tool calls waiting for an approval.",
            value=selectors.approvals_pending_count(),
        )


class _ThisProcess(Collector):
    """This process's own registry (prometheus-client's default), where no multiprocess directory
    is set: its counters and histograms, and the process's own collectors."""

    def collect(self) -> Iterator[Metric]:
        yield from REGISTRY.collect()


def metrics_multiprocess() -> bool:
    return bool(os.environ.get(MULTIPROC_ENV))


def metrics_exposition() -> tuple[bytes, str]:
    """The scrape's body in Prometheus's text format, and its content type."""
    registry = CollectorRegistry()
    if metrics_multiprocess():
        MultiProcessCollector(registry)
    else:
        registry.register(_ThisProcess())
    registry.register(StateCollector())
    return generate_latest(registry), CONTENT_TYPE_LATEST
