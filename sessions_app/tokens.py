"""Agent tokens: revoking them, and which of them are still good.

The writes go through `services.agent_token_revoke` (one token); this adds what the management
command and the admin need, and the query the open connections are re-checked with.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import transaction

from sessions_app import services
from sessions_app.models import AgentToken


def agent_tokens_revoke(*, tokens: Iterable[AgentToken]) -> int:
    """Revoke each token not revoked yet; returns how many were revoked now.

    Their open connections, in any process, are closed with 4401 within
    PALIMPSEST_TOKEN_RECHECK_SECONDS (`agent_ws/connections.py`); their sessions' running turns
    (sub-sessions' included) are cancelled, whichever process runs them, before their next model
    call (`services.agent_token_revoke`), and no new turn of theirs begins.
    """
    revoked = 0
    with transaction.atomic():
        for token in tokens:
            if token.revoked_at is None:
                services.agent_token_revoke(token=token)
                revoked += 1
    return revoked


def agent_tokens_revoke_named(*, name: str) -> int:
    """Revoke every active token called `name`; returns how many (0: none by that name is active)."""
    return agent_tokens_revoke(tokens=list(AgentToken.objects.filter(name=name, revoked_at__isnull=True)))


def agent_token_ids_active(*, token_ids: Iterable[int]) -> set[int]:
    """Those of `token_ids` whose token exists and is not revoked (one query)."""
    ids = list(token_ids)
    if not ids:
        return set()
    return set(AgentToken.objects.filter(pk__in=ids, revoked_at__isnull=True).values_list("pk", flat=True))
