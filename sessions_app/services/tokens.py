"""Agent tokens: created (shown once), authenticated by hash, revoked."""

from __future__ import annotations

import hashlib
import secrets
import uuid

from django.db import transaction
from django.utils import timezone

from sessions_app.models import AgentToken
from sessions_app.services.turns import turns_cancel_for_owners

TOKEN_PREFIX = "pal_"


def agent_token_hash(raw: str) -> str:
    # Tokens carry 256 bits of randomness, so a plain SHA-256 suffices (no slow KDF needed).
    return hashlib.sha256(raw.encode()).hexdigest()


def agent_token_create(*, name: str) -> tuple[AgentToken, str]:
    """Create a token for an agent client; returns the row and the raw token (shown once)."""
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = AgentToken.objects.create(name=name, token_hash=agent_token_hash(raw), prefix=raw[:10])
    return token, raw


def agent_token_authenticate(*, raw: str) -> AgentToken | None:
    """The active token matching `raw`, with `last_used_at` refreshed; None if none matches."""
    if not raw:
        return None
    token = AgentToken.objects.filter(token_hash=agent_token_hash(raw), revoked_at__isnull=True).first()
    if token is not None:
        now = timezone.now()
        AgentToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token


def agent_token_revoke(*, token: AgentToken) -> list[uuid.UUID]:
    """Revoke `token` and, in the same transaction, ask the running turns of its sessions (and
    so of their sub-sessions) to stop, as `turn.cancel` does: whichever process runs them, each
    stops before its next model call (`turns_cancel_for_owners`). Returns the sessions asked."""
    with transaction.atomic():
        AgentToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
        return turns_cancel_for_owners(owner_ids=[token.pk])
