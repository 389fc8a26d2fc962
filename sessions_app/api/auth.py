"""Bearer tokens: the websocket's tokens, checked the same way (`services.agent_token_authenticate`:
by hash, a revoked one refused, `last_used_at` refreshed). A client is known by its token's name:
its sessions and agents are those of every token of that name (a rotated token keeps them)."""

from __future__ import annotations

from django.http import HttpRequest
from ninja.security import HttpBearer

from sessions_app import services
from sessions_app.models import AgentToken


class TokenAuth(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str) -> AgentToken | None:
        # ninja runs a sync check in a thread for the async views.
        return services.agent_token_authenticate(raw=token.strip())


def request_token(request: HttpRequest) -> AgentToken:
    """The token that authenticated `request` (every path but the docs needs one)."""
    token = getattr(request, "auth", None)
    assert isinstance(token, AgentToken)
    return token
