"""What a server process (daphne loading `config.asgi`) does once, after Django is set up: load
what its first model call would load, then take everything loaded so far out of the cyclic
garbage collector's sight.

Why: a process that runs hundreds of turns at once allocates fast, and CPython's collector
walks every tracked object at each full collection. Django, the apps and the `anthropic` SDK
(with pydantic's schemas) are about 220,000 objects that live as long as the process; with
hundreds of turns at once, each full collection walks all of them with the event loop stopped,
and the collector takes a noticeable share of the process's CPU (`bench/bench_server.py`).
`gc.freeze()` moves what is loaded at start to the permanent generation, which no collection
walks. Objects made later (sessions, turns, connections) are collected as before; only garbage
cycles among the start-up objects would stay, and those live for the process anyway.

The first generation's threshold is raised for the same reason: the default (700 allocations)
ran a young collection every few dozen microseconds of a busy loop. Cyclic garbage waits a
little longer; memory stays bounded by the same collector.
"""

from __future__ import annotations

import gc

from sessions_app.engine.providers.choice import providers_configured

# (generation 0, 1, 2): collections of the young generation after this many allocations net of
# frees (CPython's default is 700); the older generations as by default.
GC_THRESHOLDS = (7000, 10, 10)


def server_process_ready() -> None:
    """Import the model providers the process will use, then freeze what is loaded and set the
    collector's thresholds (`GC_THRESHOLDS`). Called once by `config.asgi`."""
    configured = providers_configured()
    # A provider's SDK is imported at its first model call otherwise: inside the first turn, and
    # after the freeze.
    if "anthropic" in configured:
        import sessions_app.engine.providers.anthropic  # noqa: F401
    if "openai" in configured:
        import sessions_app.engine.providers.openai  # noqa: F401

    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
