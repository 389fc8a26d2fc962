"""Sessions writing at once on a fresh SQLite database chosen by the environment
(`PALIMPSEST_SQLITE_PATH` or `DATABASE_URL=sqlite:...`), through the real services.

Run as `python -m tests.sessions_app.sqlite_writers` (by `test_sqlite_settings.py`, once per way
of choosing SQLite): migrates the database, then WRITERS threads, each with its own connection,
run TURNS turns each in a child session of one parent, all at once. Each turn is what the turn
loop stores of a one-step turn (its start, its last step with the model call, and an event on the
parent, as a child reporting to it does), so the counters and rows of the fast path
(`sessions_app/fastpath/`) write from every thread. Prints one JSON object: the errors (type and
message), the turns done and the turns run.
"""

from __future__ import annotations

import json
import os
import threading

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings_test")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connections  # noqa: E402
from django.utils import timezone  # noqa: E402

from sessions_app import services  # noqa: E402
from sessions_app.engine import sessions as engine_sessions  # noqa: E402
from sessions_app.models import AgentSession  # noqa: E402

WRITERS = 6
TURNS = 8


def _call() -> services.ModelCallData:
    return services.ModelCallData(
        provider="scripted",
        model="scripted",
        step=1,
        purpose="turn",
        request_record={"messages": []},
        request_sha256="0" * 64,
        request_bytes=2,
        stable_prefix_bytes=0,
        estimated_prompt_tokens=1,
        started_at=timezone.now(),
        duration_ms=1,
        first_token_ms=None,
        response=None,
        stop_reason="end_turn",
        usage={"input_tokens": 5, "output_tokens": 2},
    )


def main() -> None:
    call_command("migrate", verbosity=0, interactive=False)
    parent = engine_sessions.session_create(owner=None, model="scripted")
    children = [engine_sessions.session_create(owner=None, model="scripted") for _ in range(WRITERS)]
    AgentSession.objects.filter(pk__in=[c.pk for c in children]).update(
        parent_session=parent, root_session=parent, depth=1
    )
    connections.close_all()
    start = threading.Barrier(WRITERS)
    errors: list[str] = []
    done: list[int] = []

    def run(child: AgentSession) -> None:
        try:
            start.wait()
            for i in range(TURNS):
                turn = services.turn_begin(session_id=child.pk, content=f"turn {i}")
                services.assistant_step_store_last(
                    session_id=child.pk,
                    turn_id=turn.id,
                    epoch=0,
                    content=[{"type": "text", "text": f"answer {i}"}],
                    call=_call(),
                    steps=1,
                )
                services.event_emit(
                    session_id=parent.pk, type="child.reported", payload={"child": str(child.pk), "turn": i}
                )
                done.append(1)
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(child,)) for child in children]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(json.dumps({"errors": errors, "turns": len(done), "expected": WRITERS * TURNS}))


if __name__ == "__main__":
    main()
