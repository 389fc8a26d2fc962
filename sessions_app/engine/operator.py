"""A compaction an operator asks for from the dashboard: it holds the session's lease like a turn
(no turn starts meanwhile), summarizes the whole epoch (no turn is running, so nothing is kept
verbatim) and resets the breaker. It emits no turn events: only `session.status`,
`compaction.completed` (trigger `operator`) or an `error`."""

from __future__ import annotations

import asyncio
import logging
import uuid

from sessions_app import services
from sessions_app.common.db import db
from sessions_app.engine.compaction import tiers
from sessions_app.engine.features import features
from sessions_app.engine.providers import Provider, provider_for_model
from sessions_app.engine.runner import (
    LeaseLost,
    TurnCancelled,
    TurnRunner,
    turn_repair_if_dead,
)

logger = logging.getLogger("palimpsest.engine")


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
                _, built, estimate = await self.compactor.estimate()
                feature_set = features()
                provider = self.provider or provider_for_model(
                    snapshot.model,
                    scripted_rules=feature_set.scripted_rules,
                    context_openings=feature_set.context_openings,
                )
                ok = await self.compactor.compact(
                    provider, snapshot, tokens_before=estimate, trigger=tiers.TRIGGER_OPERATOR
                )
                if not ok:
                    error = f"The compaction failed: {self.compactor.failure}"
        except (LeaseLost, TurnCancelled):
            error = "The compaction was interrupted."
        except Exception:
            logger.exception("operator compaction of session %s failed", self.session_id)
            error = "The compaction failed inside the server."
        finally:
            heartbeat.cancel()
        await db(services.compaction_operator_end)(
            session_id=self.session_id, turn_id=self.turn_id, error=error
        )
        return "error" if error else "compacted"


async def compaction_operator_start(*, session_id: uuid.UUID, provider: Provider | None = None) -> uuid.UUID:
    """Start an operator's compaction in the background; `services.TurnInProgress` while a turn
    (or another compaction) holds the session."""
    await turn_repair_if_dead(session_id=session_id, provider=provider)
    holder = uuid.uuid4()
    turn = await db(services.compaction_operator_begin)(session_id=session_id, holder=holder)
    OperatorCompaction(session_id=session_id, turn_id=turn.id, provider=provider, holder=holder).start()
    return turn.id
