"""The jail's escape attempts (tests/memory_app/sandbox/escapes.py) again, each inside an
authored tool's run(args, session), defined with define_tool and called through the engine:
a tool's call is held exactly as run_sandbox_code is."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from tests.memory_app.authored_tools.support import agent_create, call_words, define_words, result, turn
from tests.memory_app.sandbox.escapes import ESCAPES, Escape

pytestmark = pytest.mark.django_db(transaction=True)

# The attempt runs inside run(), its prints captured as the tool's result.
WRAPPER = """import contextlib, io
ATTEMPT = {code!r}
def run(args, session):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(ATTEMPT, "<attempt>", "exec"), {{"__name__": "__main__", "session": session}})
    return out.getvalue()
"""


@pytest.mark.parametrize("escape", ESCAPES, ids=[e.id for e in ESCAPES])
async def test_an_escape_attempt_fails_inside_an_authored_tool(connect: Any, escape: Escape) -> None:
    client = await connect()
    await agent_create(client)
    await client.create(agent="helper")
    defined = result(await turn(client, define_words("attempt", WRAPPER.format(code=escape.code))))
    assert defined["is_error"] is False, defined
    found = result(await turn(client, call_words("attempt", {})))
    assert found["is_error"] is False, found
    assert escape.held(found["content"]), json.dumps(found["content"])
    assert not escape.host_absent or not os.path.exists(escape.host_absent)
