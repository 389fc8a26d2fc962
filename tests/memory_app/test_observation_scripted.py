"""The scripted model's `read FILE` and `grep PATTERN`: offloading without an API key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.memory_app.observation_helpers import big_log, events, turn, use_fs_root

pytestmark = pytest.mark.django_db(transaction=True)


def _final_text(frames: list[dict]) -> str:
    return events(frames, "assistant.message")[-1]["content"][0]["text"]


async def test_read_calls_fs_read_and_reports_the_offloaded_observation(
    connect: Any, settings: Any, tmp_path: Path
) -> None:
    (use_fs_root(settings, tmp_path) / "big.log").write_text(big_log())
    client = await connect()
    await client.create()
    frames = await turn(client, "read big.log")
    (call,) = events(frames, "tool.call")
    (result,) = events(frames, "tool.result")
    assert (call["name"], call["input"]) == ("fs_read", {"path": "big.log"})
    assert f"saved in the scratchpad as {result['observation_id']}" in _final_text(frames)


async def test_read_then_grep_searches_the_observation_in_the_same_turn(
    connect: Any, settings: Any, tmp_path: Path
) -> None:
    (use_fs_root(settings, tmp_path) / "big.log").write_text(big_log())
    client = await connect()
    await client.create()
    frames = await turn(client, "read big.log then grep ERROR")
    read, grep = events(frames, "tool.call")
    first = events(frames, "tool.result")[0]
    assert grep["input"] == {"scratchpad_id": first["observation_id"], "mode": "grep", "pattern": "ERROR"}
    assert _final_text(frames) == "1 matching lines:\n2001:ERROR 2026-04-26 23:59:59 LAST_CRITICAL_EVENT"


async def test_grep_in_a_later_turn_reads_the_latest_observation_with_scope_session(
    connect: Any, settings: Any, tmp_path: Path
) -> None:
    (use_fs_root(settings, tmp_path) / "big.log").write_text(big_log())
    client = await connect()
    await client.create(settings={"offload": {"scope": "session"}})
    await turn(client, "read big.log")
    frames = await turn(client, "grep event number 1999$")
    (result,) = events(frames, "tool.result")
    assert json.loads(result["content"])["matches"] == 1


async def test_grep_without_a_readable_observation_explains_why(
    connect: Any, settings: Any, tmp_path: Path
) -> None:
    (use_fs_root(settings, tmp_path) / "big.log").write_text(big_log())
    client = await connect()
    await client.create()
    await turn(client, "read big.log")
    frames = await turn(client, "grep ERROR")
    # The tool is offered from the start (issue 32): the model tries, and the tool's error says
    # why the earlier turn's observation cannot be read here.
    (result,) = events(frames, "tool.result")
    assert result["is_error"] and "belongs to an earlier turn" in result["content"]
    assert "belongs to an earlier turn" in _final_text(frames)


async def test_read_without_a_shared_folder_explains_how_to_set_one(connect: Any, settings: Any) -> None:
    settings.PALIMPSEST_FS_ROOT = ""
    client = await connect()
    await client.create()
    frames = await turn(client, "read big.log")
    assert "PALIMPSEST_FS_ROOT" in _final_text(frames)
