"""A compaction an operator asks for from the dashboard: it holds the session's lease like a turn
(no turn starts meanwhile), gives the agent seed 000's warning step first (a model call with its
tools, whose answer is stored: the agent may update its notepad), then summarizes the whole epoch
(no turn is running, so nothing is kept verbatim) and resets the breaker. It emits no
`turn.started` or `turn.completed`: `compaction.warning` and the warning step's events, then
`session.status`, `compaction.completed` (trigger `operator`) or an `error`."""

from __future__ import annotations

import asyncio
import logging
import uuid

from sessions_app import services
from sessions_app.common.db import db, db_heavy
from sessions_app.common.estimate import estimate_json_tokens
from sessions_app.engine.budget_check import BudgetReached
from sessions_app.engine.compaction import tiers
from sessions_app.engine.contract import SessionSnapshot
from sessions_app.engine.features import features
from sessions_app.engine.providers import Provider, ProviderError, provider_for_model
from sessions_app.engine.runner import (
    LeaseLost,
    TurnCancelled,
    TurnRunner,
    turn_repair_if_dead,
)
from sessions_app.engine.tool_dispatch import PendingCall, tool_calls_plan
from sessions_app.models import ToolExecutor

logger = logging.getLogger("palimpsest.engine")
NO_CLIENT_TOOL_RESULT = (
    "No client is connected during an operator's compaction: client tools cannot run now. Use the "
    "server's tools (the notepad) to keep what you need."
)


class OperatorCompaction(TurnRunner):
    async def run(self) -> str:
        services.lease_hold(session_id=self.session_id, holder=self.holder)
        heartbeat = asyncio.create_task(self._heartbeat())
        error = ""
        try:
            snapshot = await db(self._load)()
            # No running turn: the whole epoch is older history.
            self.compactor.turn_start = self.history.last_position + 1
            if not self.compactor.older():
                error = "There is nothing to compact yet: the session has no history since its last summary."
            else:
                snapshot, _, estimate = await self.compactor.estimate()
                feature_set = features()
                provider = self.provider or provider_for_model(
                    snapshot.model,
                    scripted_rules=feature_set.scripted_rules,
                    context_openings=feature_set.context_openings,
                )
                prepared = await self.compactor.warning_step(snapshot, estimate)
                if prepared is not None:
                    snapshot = await self._warning_answer(provider, prepared)
                ok = await self.compactor.compact(
                    provider, snapshot, tokens_before=estimate, trigger=tiers.TRIGGER_OPERATOR
                )
                if not ok:
                    error = f"The compaction failed: {self.compactor.failure}"
        except (LeaseLost, TurnCancelled):
            error = "The compaction was interrupted."
        except BudgetReached as exc:
            error = f"The compaction was not made: {exc.stop.message}"
        except Exception:
            logger.exception("operator compaction of session %s failed", self.session_id)
            error = "The compaction failed inside the server."
        finally:
            heartbeat.cancel()
        await db(services.compaction_operator_end)(
            session_id=self.session_id, turn_id=self.turn_id, error=error
        )
        return "error" if error else "compacted"

    async def _warning_answer(self, provider: Provider, prepared: tiers.Prepared) -> SessionSnapshot:
        """The warning step: the model's answer to the warning stored, its server tools run (no
        client is there to run its own: those calls are answered with an error). A failed model
        call is logged and the summary goes on."""
        snapshot = prepared.snapshot
        built = await self.budget_guard(snapshot, prepared.built)
        self.steps = 1
        try:
            response, call_data, delta_text = await self._call_model(provider, snapshot, built)
        except ProviderError:
            logger.warning("the warning step of session %s failed", self.session_id, exc_info=True)
            return snapshot
        calls = [
            c
            if c.executor == ToolExecutor.SERVER
            else PendingCall(c.tool_use_id, c.name, c.input, ToolExecutor.SERVER, NO_CLIENT_TOOL_RESULT)
            for c in tool_calls_plan(snapshot, response.content)
        ]
        if calls:
            calls = await db_heavy(self.tools.inputs_resolve)(snapshot, calls)
        content = [b for b in response.content if not (b.get("type") == "text" and not b.get("text"))]
        token_estimate = estimate_json_tokens(content)
        await self._step_store(
            content=content, call=call_data, calls=calls, token_estimate=token_estimate, delta_text=delta_text
        )
        if calls:
            room = self._results_room(snapshot, prepared.built, calls=len(calls))
            await self._calls_answer(snapshot, calls, room_tokens=room)
        return snapshot


async def compaction_operator_start(*, session_id: uuid.UUID, provider: Provider | None = None) -> uuid.UUID:
    """Start an operator's compaction in the background; `services.TurnInProgress` while a turn
    (or another compaction) holds the session."""
    await turn_repair_if_dead(session_id=session_id, provider=provider)
    holder = uuid.uuid4()
    turn = await db(services.compaction_operator_begin)(session_id=session_id, holder=holder)
    OperatorCompaction(session_id=session_id, turn_id=turn.id, provider=provider, holder=holder).start()
    return turn.id
