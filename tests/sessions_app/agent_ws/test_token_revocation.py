"""A revoked token's open connections close with 4401 within seconds (DESIGN.md, Security)."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from asgiref.sync import sync_to_async
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client as HttpClient
from django.urls import reverse
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from sessions_app import services, tokens
from sessions_app.agent_ws import connections
from sessions_app.models import AgentSession, AgentToken
from tests.servers import Daphne, manage, server_env

pytestmark = pytest.mark.django_db(transaction=True)


async def test_open_connections_of_a_revoked_token_are_closed_with_4401(connect, make_token, settings):
    settings.PALIMPSEST_TOKEN_RECHECK_SECONDS = 0.2
    raw = await make_token("doomed")
    one, two = await connect(raw), await connect(raw)
    other = await connect(await make_token("fine"))  # another token's connection stays open
    await one.create()
    await sync_to_async(tokens.agent_tokens_revoke_named)(name="doomed")
    for client in (one, two):
        assert await client.ws.receive_output(timeout=3) == {"type": "websocket.close", "code": 4401}
    assert (await other.create())["id"]
    await other.close()


async def test_a_frame_after_revocation_is_not_handled(connect, make_token, settings):
    settings.PALIMPSEST_TOKEN_RECHECK_SECONDS = 0.2
    client = await connect(await make_token("solo"))
    await sync_to_async(tokens.agent_tokens_revoke_named)(name="solo")
    await asyncio.sleep(0.5)  # past two intervals: the frame re-checks if no round has run
    await client.send({"type": "session.create"})
    assert await client.ws.receive_output(timeout=3) == {"type": "websocket.close", "code": 4401}
    assert await sync_to_async(AgentSession.objects.count)() == 0


async def test_a_deleted_token_is_treated_as_revoked(connect, make_token, settings):
    settings.PALIMPSEST_TOKEN_RECHECK_SECONDS = 0.2
    client = await connect(await make_token())
    await sync_to_async(AgentToken.objects.all().delete)()
    assert await client.ws.receive_output(timeout=3) == {"type": "websocket.close", "code": 4401}


async def test_one_query_rechecks_every_token_of_the_process(connect, make_token, settings, monkeypatch):
    settings.PALIMPSEST_TOKEN_RECHECK_SECONDS = 60  # no round of its own during the test
    clients = [await connect(await make_token(f"t{n}")) for n in range(3)]
    asked: list[list[int]] = []
    real = tokens.agent_token_ids_active

    def counted(*, token_ids):
        asked.append(sorted(token_ids))
        return real(token_ids=token_ids)

    monkeypatch.setattr(connections, "agent_token_ids_active", counted)
    await connections.tokens_recheck()
    ids = sorted(await sync_to_async(lambda: list(AgentToken.objects.values_list("pk", flat=True)))())
    assert asked == [ids]
    for client in clients:
        await client.close()


async def test_the_registry_forgets_closed_connections(connect, make_token):
    raw = await make_token()
    client = await connect(raw)
    token = await sync_to_async(AgentToken.objects.get)()
    assert connections.connections_open(token_id=token.pk) == 1
    await client.close()
    assert connections.connections_open(token_id=token.pk) == 0


# -- the command and the admin --------------------------------------------------------------
def test_revoke_command_revokes_every_active_token_of_that_name(transactional_db, capsys):
    services.agent_token_create(name="ci")
    services.agent_token_create(name="ci")
    kept, _ = services.agent_token_create(name="other")
    call_command("revoke_agent_token", "ci")
    assert "Revoked 2 tokens called 'ci'" in capsys.readouterr().out
    assert AgentToken.objects.filter(name="ci", revoked_at__isnull=True).count() == 0
    kept.refresh_from_db()
    assert kept.revoked_at is None
    with pytest.raises(CommandError, match="No active token"):
        call_command("revoke_agent_token", "ci")


def test_admin_action_revokes_selected_tokens(transactional_db, admin_client: HttpClient):
    one, _ = services.agent_token_create(name="a")
    two, _ = services.agent_token_create(name="b")
    response = admin_client.post(
        reverse("admin:sessions_app_agenttoken_changelist"),
        {"action": "revoke", "_selected_action": [one.pk]},
        follow=True,
    )
    assert "Revoked 1 token(s)." in response.content.decode()
    one.refresh_from_db()
    two.refresh_from_db()
    assert one.revoked_at is not None and two.revoked_at is None


# -- real processes: two daphne servers, no Redis, the command in a process of its own --------
async def _open(server: Daphne, token: str) -> ClientConnection:
    return await connect(server.ws_url, additional_headers={"Authorization": f"Bearer {token}"})


async def _close_code(ws: ClientConnection, timeout: float) -> int | None:
    try:
        while True:
            await asyncio.wait_for(ws.recv(), timeout=timeout)
    except ConnectionClosed as exc:
        return exc.rcvd.code if exc.rcvd is not None else None
    except TimeoutError:
        return None


async def test_revoking_from_the_command_closes_sockets_in_every_daphne_process(tmp_path):
    env = server_env(PALIMPSEST_SQLITE_PATH=str(tmp_path / "revoke.sqlite3"))
    manage("migrate", "--noinput", env=env)
    token = manage("create_agent_token", "doomed", env=env).strip().splitlines()[-1]
    survivor = manage("create_agent_token", "fine", env=env).strip().splitlines()[-1]
    with Daphne(env, tmp_path / "one.log") as one, Daphne(env, tmp_path / "two.log") as two:
        sockets = [await _open(one, token), await _open(two, token)]
        kept = await _open(two, survivor)
        await sockets[0].send(json.dumps({"type": "session.create"}))
        assert json.loads(await sockets[0].recv())["type"] == "session.created"
        started = time.monotonic()
        await asyncio.to_thread(manage, "revoke_agent_token", "doomed", env=env)
        codes = await asyncio.gather(*(_close_code(ws, timeout=10) for ws in sockets))
        elapsed = time.monotonic() - started
        await kept.send(json.dumps({"type": "session.create"}))
        assert json.loads(await kept.recv())["type"] == "session.created"
        await kept.close()
    assert codes == [4401, 4401]
    assert elapsed < 8  # the default re-check interval is 2 s (plus starting the command)
