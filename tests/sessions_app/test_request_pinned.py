"""The exact request of a default session, pinned byte for byte.

The order of the features decides the order of the system prompt's sections and of the tools,
and so the cached prefix: a reordering (or a changed seed text) must be a deliberate change of
these golden files, never an accident. Regenerate with PALIMPSEST_PIN_WRITE=1 after such a change.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from sessions_app import selectors
from sessions_app.models import ModelCall

pytestmark = pytest.mark.django_db(transaction=True)
GOLDEN = Path(__file__).parent / "golden"


@pytest.fixture(autouse=True)
def _sandbox_as_in_ci(settings: Any) -> None:
    """The golden requests include `run_sandbox_code`, offered where bubblewrap runs (CI)."""
    from memory_app.sandbox.jail import sandbox_available

    settings.PALIMPSEST_SANDBOX = "auto"
    if not sandbox_available():
        message = "bubblewrap cannot run here: the pinned requests include run_sandbox_code"
        if os.environ.get("PALIMPSEST_REQUIRE_SANDBOX") == "1":
            pytest.fail(message)
        pytest.skip(message)


def _pinned(name: str, request: dict[str, Any]) -> None:
    body = {
        key: request[key] for key in ("model", "max_tokens", "system", "tools", "messages") if key in request
    }
    text = json.dumps(body, ensure_ascii=False, indent=1) + "\n"
    path = GOLDEN / f"{name}.json"
    if os.environ.get("PALIMPSEST_PIN_WRITE"):
        path.write_text(text)
    assert text == path.read_text()


async def _first_request(client: Any, content: str) -> dict[str, Any]:
    await client.send({"type": "user.message", "content": content})
    await client.until("turn.completed")
    call = await sync_to_async(lambda: ModelCall.objects.order_by("started_at").first())()
    assert call is not None
    return await sync_to_async(selectors.model_call_request)(call=call)


async def test_default_session_request_is_pinned(connect):
    client = await connect()
    await client.create(system_prompt="You help.")
    _pinned("default_session", await _first_request(client, "hello"))


async def test_session_with_every_tool_and_message_position_is_pinned(connect, settings, tmp_path):
    settings.PALIMPSEST_FS_ROOT = str(tmp_path)
    client = await connect()
    await client.create(
        system_prompt="You help.",
        settings={
            "notepad": {"position": "message"},
            "scratchpad": {"nudge_after_turns": 2},
            "offload": {"scope": "session"},
        },
    )
    _pinned("every_tool_message_position", await _first_request(client, "hello"))


async def test_a_session_of_an_agent_with_learned_text_and_skills_is_pinned(connect):
    """DESIGN.md, "Agents": the agent's instructions, the session's own prompt, the features'
    guidance; then `## Learned Instructions`, `## Skills` and the features' pinned sections (the
    notepad last); the agent's tools among the others."""
    from sessions_app.models import Agent, AgentSkill

    client = await connect()
    await client.send({"type": "agent.create", "name": "auditor", "system_prompt": "You audit ledgers."})
    assert (await client.recv())["type"] == "agent.created"

    def knowledge() -> None:
        agent = Agent.objects.get(name="auditor")
        Agent.objects.filter(pk=agent.pk).update(learned="Cite the ledger line.", learned_version=1)
        AgentSkill.objects.create(agent=agent, name="vat-check", description="Check VAT lines.", version=1)

    await sync_to_async(knowledge)()
    await client.create(agent="auditor", system_prompt="This session: Q3.")
    _pinned("agent_session", await _first_request(client, "hello"))
