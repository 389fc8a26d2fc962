"""A call of an authored tool that returns no value: each way it fails is a tool error saying
which (an exception with its traceback's last lines, a timeout, the memory limit, a value that
is not JSON or too large), and define_tool's misuses store nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from sessions_app.agent_models import AgentTool, AgentVersion
from tests.memory_app.authored_tools.support import agent_create, call_words, define_words, result, turn

pytestmark = pytest.mark.django_db(transaction=True)


async def call_once(connect: Any, code: str, *, settings: dict | None = None) -> dict:
    client = await connect()
    await agent_create(client)
    await client.create(agent="helper", settings=settings or {})
    defined = result(await turn(client, define_words("probe", code)))
    assert defined["is_error"] is False, defined
    return result(await turn(client, call_words("probe", {})))


async def test_an_exception_is_a_tool_error_with_the_tracebacks_last_lines(connect: Any) -> None:
    code = (
        "def helper(n):\n"
        "    raise ValueError(f'bad thing {n}')\n"
        "def run(args, session):\n"
        "    print('before the error')\n"
        "    return helper(7)\n"
    )
    found = await call_once(connect, code)
    assert found["is_error"] is True
    assert "raised an exception" in found["content"]
    assert found["content"].rstrip().endswith("ValueError: bad thing 7")
    assert "line 2, in helper" in found["content"]
    assert "bootstrap" not in found["content"]


async def test_an_exception_at_the_top_of_the_code_is_a_tool_error_too(connect: Any) -> None:
    found = await call_once(connect, "import no_such_module\ndef run(args, session):\n    return 1\n")
    assert found["is_error"] is True
    assert "ModuleNotFoundError: No module named 'no_such_module'" in found["content"]


async def test_a_timeout_stops_the_tool_and_says_so(connect: Any) -> None:
    code = "import time\ndef run(args, session):\n    time.sleep(60)\n"
    found = await call_once(connect, code, settings={"sandbox": {"timeout_seconds": 1}})
    assert found["is_error"] is True
    assert "did not finish within 1 seconds" in found["content"]


async def test_the_memory_limit_is_a_clear_error(connect: Any) -> None:
    code = "def run(args, session):\n    return len(bytearray(512 * 1024 * 1024))\n"
    found = await call_once(connect, code, settings={"sandbox": {"memory_mb": 128}})
    assert found["is_error"] is True
    assert "ran out of memory" in found["content"] and "128 MB" in found["content"]


@pytest.mark.parametrize(
    ("value", "words"),
    [("{1, 2}", "set is not JSON serializable"), ("float('nan')", "Out of range float values")],
)
async def test_a_value_that_is_not_json_is_an_error(connect: Any, value: str, words: str) -> None:
    found = await call_once(connect, f"def run(args, session):\n    return {value}\n")
    assert found["is_error"] is True
    assert "not JSON" in found["content"] and words in found["content"]


async def test_a_value_over_the_limit_is_an_error(connect: Any) -> None:
    found = await call_once(connect, "def run(args, session):\n    return 'x' * (2 * 1024 * 1024)\n")
    assert found["is_error"] is True
    assert "over the limit of 1048576 bytes" in found["content"]


async def test_a_value_of_any_json_type_is_its_json(connect: Any) -> None:
    found = await call_once(connect, "def run(args, session):\n    return [1, None, {'a': 'é'}]\n")
    assert (found["is_error"], found["content"]) == (False, '[1, null, {"a": "é"}]')


def _nothing_stored() -> bool:
    return not AgentTool.objects.exists() and not AgentVersion.objects.filter(part="tool").exists()


@pytest.mark.parametrize(
    ("words", "message"),
    [
        (define_words("read_notepad", "def run(args, session):\n    return 1\n"), "may not shadow"),
        (define_words("run_sandbox_code", "def run(args, session):\n    return 1\n"), "may not shadow"),
        (define_words("define_tool", "def run(args, session):\n    return 1\n"), "may not shadow"),
        # A feature's tool that this session is not offered is reserved too.
        (define_words("session_archive_read", "def run(args, session):\n    return 1\n"), "may not shadow"),
        (define_words("lookup", "def run(args, session):\n    return 1\n"), "may not shadow"),
        (define_words("bad", "def run(args, session)\n    return 1\n"), "does not compile"),
        (define_words("bad", "def main(args, session):\n    return 1\n"), "def run(args, session)"),
        (
            define_words("bad", "def run(a, s):\n    return 1\n", schema={"type": "object", "minLength": 1}),
            "minLength",
        ),
    ],
)
async def test_a_misuse_of_define_tool_is_a_tool_error_and_stores_nothing(
    connect: Any, words: str, message: str
) -> None:
    client = await connect()
    await agent_create(client)
    lookup = {"name": "lookup", "description": "Look up.", "input_schema": {"type": "object"}}
    await client.create(agent="helper", tools=[lookup])
    found = result(await turn(client, words))
    assert found["is_error"] is True and message in found["content"], found
    assert await sync_to_async(_nothing_stored)()


async def test_another_sessions_client_tool_of_that_name_wins_there(connect: Any) -> None:
    client = await connect()
    await agent_create(client)
    await client.create(agent="helper")
    await turn(client, define_words("lookup", "def run(args, session):\n    return 'authored'\n"))
    lookup = {"name": "lookup", "description": "Look up.", "input_schema": {"type": "object"}}
    other = await client.create(agent="helper", tools=[lookup])
    assert "lookup" not in other["server_tools"]
    await client.send({"type": "user.message", "content": call_words("lookup", {})})
    call = (await client.until("tool.call", timeout=30))[-1]
    # Asked of the client, not run here: its answer is the result.
    await client.send({"type": "tool.result", "tool_use_id": call["tool_use_id"], "content": "client's"})
    frames = await client.until("turn.completed", timeout=30)
    assert "lookup returned: client's" in json.dumps(frames)
