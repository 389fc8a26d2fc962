"""`scratchpad_read` through the fake Messages API: every mode and every error, as the model
receives them."""

from __future__ import annotations

import base64
import json
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from memory_app.observations.models import Observation, ObservationChunk
from tests.fake_anthropic import FakeAnthropicServer, Reply, text, tool_use
from tests.memory_app.observation_helpers import (
    big_log,
    latest_observation_id,
    tool_names,
    tool_result,
    turn,
    use_fs_root,
)

pytestmark = pytest.mark.django_db(transaction=True)

LOG = big_log()  # 2001 lines, about 90,000 characters: two chunks
BINARY = bytes(range(256)) * 40


def read(**arguments: Any) -> Any:
    """A model reply calling scratchpad_read on the latest observation it was shown."""

    def reply(body: dict) -> Reply:
        return tool_use("scratchpad_read", {"scratchpad_id": latest_observation_id(body), **arguments})

    return reply


async def _read_after_offload(
    connect: Any,
    fake_anthropic: FakeAnthropicServer,
    settings: Any,
    tmp_path: Path,
    reply: Any,
    *,
    data: str | bytes = LOG,
) -> dict:
    """fs_read offloads `data`, then the model makes `reply`; returns the tool_result it got."""
    root = use_fs_root(settings, tmp_path)
    binary = isinstance(data, bytes)
    (root / "data").write_bytes(data if isinstance(data, bytes) else data.encode())
    fs_input = {"path": "data", "encoding": "binary"} if binary else {"path": "data"}
    fake_anthropic.enqueue(tool_use("fs_read", fs_input), reply, text("done"))
    client = await connect()
    await client.create()
    await turn(client)
    return tool_result(fake_anthropic.requests[2].body)


async def _ok(*args: Any, **kwargs: Any) -> dict:
    block = await _read_after_offload(*args, **kwargs)
    assert "is_error" not in block, block
    return json.loads(block["content"])


async def _error(*args: Any, **kwargs: Any) -> str:
    block = await _read_after_offload(*args, **kwargs)
    assert block["is_error"] is True
    return block["content"]


# -- offering --------------------------------------------------------------------------------
async def test_offered_from_the_first_request_so_the_tool_list_never_changes(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path
) -> None:
    # Issue 32: a tool appearing once an observation exists rewrote the whole cached prefix
    # (tools come first). Seed 004's isolation is the tool refusing another turn's id.
    await _read_after_offload(connect, fake_anthropic, settings, tmp_path, read())
    lists = [tool_names(r.body) for r in fake_anthropic.requests]
    assert "fs_read" in lists[0]
    assert "scratchpad_read" in lists[0]
    assert all(names == lists[0] for names in lists)


async def test_offered_once_an_observation_exists(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path
) -> None:
    await _read_after_offload(connect, fake_anthropic, settings, tmp_path, read())
    tool = next(t for t in fake_anthropic.requests[1].body["tools"] if t["name"] == "scratchpad_read")
    assert tool["input_schema"]["required"] == ["scratchpad_id"]
    assert tool["input_schema"]["properties"]["mode"]["enum"] == [
        "full",
        "head",
        "tail",
        "range",
        "lines",
        "grep",
    ]


async def test_offered_after_small_results_too(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path
) -> None:
    root = use_fs_root(settings, tmp_path)
    (root / "small").write_text("small\n")
    fake_anthropic.enqueue(tool_use("fs_read", {"path": "small"}), text("done"))
    client = await connect()
    await client.create()
    await turn(client)
    assert tool_names(fake_anthropic.requests[1].body) == tool_names(fake_anthropic.requests[0].body)
    assert "scratchpad_read" in tool_names(fake_anthropic.requests[1].body)


# -- modes -----------------------------------------------------------------------------------
async def test_head_reads_the_first_2000_characters_by_default(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path
) -> None:
    result = await _ok(connect, fake_anthropic, settings, tmp_path, read())
    assert (result["mode"], result["start"], result["end"]) == ("head", 0, 2000)
    assert result["content"] == LOG[:2000]
    assert result["total_chars"] == len(LOG)


async def test_head_reads_n_characters(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path
) -> None:
    result = await _ok(connect, fake_anthropic, settings, tmp_path, read(mode="head", n=37))
    assert result["content"] == LOG[:37]


async def test_tail_reads_the_last_n_characters(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path
) -> None:
    result = await _ok(connect, fake_anthropic, settings, tmp_path, read(mode="tail", n=46))
    assert result["content"] == "ERROR 2026-04-26 23:59:59 LAST_CRITICAL_EVENT\n"
    assert (result["start"], result["end"]) == (len(LOG) - 46, len(LOG))


async def test_tail_defaults_to_2000_characters(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path
) -> None:
    result = await _ok(connect, fake_anthropic, settings, tmp_path, read(mode="tail"))
    assert result["content"] == LOG[-2000:]


async def test_range_reads_start_to_end_exclusive_across_chunks(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path
) -> None:
    result = await _ok(
        connect, fake_anthropic, settings, tmp_path, read(mode="range", start=65_000, end=66_000)
    )
    assert result["content"] == LOG[65_000:66_000]


async def test_range_end_past_the_content_is_clamped(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path
) -> None:
    start = len(LOG) - 10
    result = await _ok(
        connect, fake_anthropic, settings, tmp_path, read(mode="range", start=start, end=start + 100)
    )
    assert (result["content"], result["end"]) == (LOG[start:], len(LOG))


async def test_full_reads_everything(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path
) -> None:
    small = big_log(100)  # over 4096 bytes, under the read limit
    result = await _ok(connect, fake_anthropic, settings, tmp_path, read(mode="full"), data=small)
    assert result["content"] == small


async def test_lines_reads_a_range_of_lines(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path
) -> None:
    result = await _ok(
        connect, fake_anthropic, settings, tmp_path, read(mode="lines", start_line=2, end_line=4)
    )
    assert result["content"] == "".join(LOG.splitlines(keepends=True)[1:4])
    assert (result["start_line"], result["end_line"], result["total_lines"]) == (2, 4, 2001)


async def test_lines_reads_lines_held_by_two_chunks(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path
) -> None:
    lines = LOG.splitlines(keepends=True)
    boundary = LOG[:65_536].count("\n") + 1  # the line cut by the first chunk's end
    result = await _ok(
        connect,
        fake_anthropic,
        settings,
        tmp_path,
        read(mode="lines", start_line=boundary - 1, end_line=boundary + 1),
    )
    assert result["content"] == "".join(lines[boundary - 2 : boundary + 1])


async def test_lines_end_past_the_content_stops_at_the_last_line(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path
) -> None:
    result = await _ok(
        connect, fake_anthropic, settings, tmp_path, read(mode="lines", start_line=2000, end_line=5000)
    )
    assert result["content"] == "".join(LOG.splitlines(keepends=True)[1999:])
    assert result["end_line"] == 2001


async def test_grep_lists_matching_lines_with_their_numbers(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path
) -> None:
    result = await _ok(connect, fake_anthropic, settings, tmp_path, read(mode="grep", pattern="ERROR"))
    assert result["content"] == "2001:ERROR 2026-04-26 23:59:59 LAST_CRITICAL_EVENT"
    assert result["matches"] == 1


async def test_grep_shows_context_lines_and_separates_groups(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path
) -> None:
    result = await _ok(
        connect, fake_anthropic, settings, tmp_path, read(mode="grep", pattern=r"number (5|50)$", context=1)
    )
    lines = LOG.splitlines()
    assert result["content"] == "\n".join(
        [
            f"5-{lines[4]}",
            f"6:{lines[5]}",
            f"7-{lines[6]}",
            "--",
            f"50-{lines[49]}",
            f"51:{lines[50]}",
            f"52-{lines[51]}",
        ]
    )


async def test_grep_stops_at_max_matches(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path
) -> None:
    result = await _ok(
        connect, fake_anthropic, settings, tmp_path, read(mode="grep", pattern="INFO", max_matches=2)
    )
    lines = LOG.splitlines()
    assert result["content"] == f"1:{lines[0]}\n2:{lines[1]}"
    assert result["matches"] == 2
    assert "max_matches" in result["stopped"]


async def test_binary_head_reads_base64_bytes(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path
) -> None:
    result = await _ok(connect, fake_anthropic, settings, tmp_path, read(mode="head", n=300), data=BINARY)
    assert (result["kind"], result["encoding"]) == ("binary", "base64")
    assert base64.b64decode(result["content"]) == BINARY[:300]


async def test_binary_range_reads_base64_bytes(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path
) -> None:
    result = await _ok(
        connect, fake_anthropic, settings, tmp_path, read(mode="range", start=1000, end=1500), data=BINARY
    )
    assert base64.b64decode(result["content"]) == BINARY[1000:1500]


async def test_binary_tail_reads_base64_bytes(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path
) -> None:
    result = await _ok(connect, fake_anthropic, settings, tmp_path, read(mode="tail", n=10), data=BINARY)
    assert base64.b64decode(result["content"]) == BINARY[-10:]


async def test_reads_are_not_offloaded_themselves(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path
) -> None:
    result = await _ok(connect, fake_anthropic, settings, tmp_path, read(mode="head", n=20_000))
    assert result["content"] == LOG[:20_000]


# -- errors ----------------------------------------------------------------------------------
@pytest.mark.parametrize("observation_id", ["0123456789abcdef", "not-an-id", ""])
async def test_unknown_id_is_a_tool_error(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path, observation_id: str
) -> None:
    message = await _error(
        connect,
        fake_anthropic,
        settings,
        tmp_path,
        tool_use("scratchpad_read", {"scratchpad_id": observation_id}),
    )
    assert message.startswith(f"No observation with scratchpad_id {observation_id!r} in this session.")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"mode": "range", "start": 10, "end": 5}, "range needs 0 <= start < end."),
        ({"mode": "range", "start": -1, "end": 5}, "range needs 0 <= start < end."),
        ({"mode": "range", "start": 10}, "mode range needs start and end."),
        ({"mode": "range", "start": 10**7, "end": 10**7 + 1}, "start 10000000 is past the end"),
        ({"mode": "range", "start": 0, "end": 50_001}, "A range is limited to 50000 characters"),
        ({"mode": "head", "n": 0}, "n must be from 1 to 50000 (characters)."),
        ({"mode": "tail", "n": 50_001}, "n must be from 1 to 50000 (characters)."),
        ({"mode": "head", "n": "10"}, '"n" must be an integer, not a string.'),
        ({"mode": "full"}, "a full read is limited to 50000"),
        ({"mode": "lines"}, "mode lines needs start_line."),
        ({"mode": "lines", "start_line": 0}, "lines needs 1 <= start_line <= end_line."),
        ({"mode": "lines", "start_line": 5, "end_line": 4}, "lines needs 1 <= start_line <= end_line."),
        (
            {"mode": "lines", "start_line": 2002},
            "start_line 2002 is past the end: the observation has 2001 lines.",
        ),
        ({"mode": "grep"}, "mode grep needs pattern"),
        ({"mode": "grep", "pattern": "(unclosed"}, "pattern is not a valid regular expression"),
        ({"mode": "grep", "pattern": "x" * 501}, "over its limit of 500 (GREP_PATTERN_MAX_CHARS)"),
        ({"mode": "grep", "pattern": "x", "context": 21}, "context must be from 0 to 20."),
        ({"mode": "grep", "pattern": "x", "max_matches": 0}, "max_matches must be from 1 to 500."),
        ({"mode": "sideways"}, '"mode" must be one of full, head, tail, range, lines, grep, not "sideways".'),
    ],
)
async def test_bad_arguments_are_tool_errors(
    connect: Any,
    fake_anthropic: FakeAnthropicServer,
    settings: Any,
    tmp_path: Path,
    arguments: dict,
    message: str,
) -> None:
    assert message in await _error(connect, fake_anthropic, settings, tmp_path, read(**arguments))


@pytest.mark.parametrize("mode", ["lines", "grep"])
async def test_text_modes_on_a_binary_observation_are_tool_errors(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path, mode: str
) -> None:
    message = await _error(
        connect, fake_anthropic, settings, tmp_path, read(mode=mode, start_line=1, pattern="x"), data=BINARY
    )
    assert f"is binary: mode {mode} reads text" in message


async def test_catastrophic_pattern_is_stopped_and_reported(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path
) -> None:
    data = "a" * 1999 + "!\n" + "padding\n" * 1000
    started = time.monotonic()
    message = await _error(
        connect, fake_anthropic, settings, tmp_path, read(mode="grep", pattern="(a|aa)+$"), data=data
    )
    assert "catastrophic backtracking" in message
    assert time.monotonic() - started < 8


async def test_another_sessions_observation_reads_as_unknown(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path
) -> None:
    root = use_fs_root(settings, tmp_path)
    (root / "log").write_text(LOG)
    fake_anthropic.enqueue(tool_use("fs_read", {"path": "log"}), text("done"))
    first = await connect()
    await first.create()
    await turn(first)
    theirs = latest_observation_id(fake_anthropic.requests[1].body)
    fake_anthropic.enqueue(
        tool_use("fs_read", {"path": "log"}),
        tool_use("scratchpad_read", {"scratchpad_id": theirs}),
        text("done"),
    )
    second = await connect()
    await second.create()
    await turn(second)
    block = tool_result(fake_anthropic.requests[4].body)
    assert block["is_error"] is True
    assert block["content"].startswith(f"No observation with scratchpad_id {theirs!r} in this session.")


async def _two_turns(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path, scope: str
) -> dict:
    """Turn 1 offloads; turn 2 offloads again and reads turn 1's observation."""
    root = use_fs_root(settings, tmp_path)
    (root / "log").write_text(LOG)
    fake_anthropic.enqueue(tool_use("fs_read", {"path": "log"}), text("done"))
    client = await connect()
    await client.create(settings={"offload": {"scope": scope}})
    await turn(client)
    earlier = latest_observation_id(fake_anthropic.requests[1].body)
    fake_anthropic.enqueue(
        tool_use("fs_read", {"path": "log"}),
        tool_use("scratchpad_read", {"scratchpad_id": earlier, "mode": "head", "n": 5}),
        text("done"),
    )
    await turn(client)
    return tool_result(fake_anthropic.requests[4].body)


async def test_scope_turn_hides_an_earlier_turns_observation(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path
) -> None:
    block = await _two_turns(connect, fake_anthropic, settings, tmp_path, "turn")
    assert block["is_error"] is True
    assert "belongs to an earlier turn" in block["content"]


async def test_scope_session_reads_an_earlier_turns_observation(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path
) -> None:
    block = await _two_turns(connect, fake_anthropic, settings, tmp_path, "session")
    assert json.loads(block["content"])["content"] == LOG[:5]


async def test_scope_turn_offers_the_tool_in_the_next_turn_too_and_the_tool_list_is_unchanged(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path
) -> None:
    # Seed 004's isolation is the tool refusing another turn's id (the test above), not the tool
    # being hidden: hiding it changed the cached prefix (issue 32).
    await _two_turns(connect, fake_anthropic, settings, tmp_path, "turn")
    assert tool_names(fake_anthropic.requests[2].body) == tool_names(fake_anthropic.requests[0].body)


async def test_scope_session_offers_the_tool_in_the_next_turn(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path
) -> None:
    await _two_turns(connect, fake_anthropic, settings, tmp_path, "session")
    assert "scratchpad_read" in tool_names(fake_anthropic.requests[2].body)


async def test_expired_observation_is_a_tool_error(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path
) -> None:
    root = use_fs_root(settings, tmp_path)
    (root / "log").write_text(LOG)

    def read_later(body: dict) -> Reply:
        time.sleep(1.1)  # ttl_seconds is 1
        return read(mode="head")(body)

    fake_anthropic.enqueue(tool_use("fs_read", {"path": "log"}), read_later, text("done"))
    client = await connect()
    await client.create(settings={"offload": {"ttl_seconds": 1}})
    await turn(client)
    block = tool_result(fake_anthropic.requests[2].body)
    assert block["is_error"] is True
    assert "expired at" in block["content"]


@pytest.mark.parametrize("scope", ["turn", "session"])
async def test_an_observation_whose_content_retention_dropped_reads_as_expired_not_unknown(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any, tmp_path: Path, scope: str
) -> None:
    root = use_fs_root(settings, tmp_path)
    (root / "log").write_text(LOG)
    fake_anthropic.enqueue(tool_use("fs_read", {"path": "log"}), text("done"))
    client = await connect()
    created = await client.create(settings={"offload": {"scope": scope}})
    await turn(client)
    given = latest_observation_id(fake_anthropic.requests[1].body)
    await sync_to_async(Observation.objects.filter(session_id=created["id"]).update)(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    # The next turn starts with the garbage collection, which drops the content.
    fake_anthropic.enqueue(tool_use("scratchpad_read", {"scratchpad_id": given}), text("done"))
    await turn(client)
    assert not await sync_to_async(ObservationChunk.objects.filter(observation_id=given).exists)()
    block = tool_result(fake_anthropic.requests[3].body)
    assert block["is_error"] is True
    assert block["content"].startswith(f"The observation {given} (fs_read, ")
    assert "expired at" in block["content"] and "Call fs_read again" in block["content"]
    assert "No observation with scratchpad_id" not in block["content"]


def test_the_description_starts_with_the_seeds_words() -> None:
    from memory_app.observations.prompts import SCRATCHPAD_READ_DESCRIPTION

    assert SCRATCHPAD_READ_DESCRIPTION.startswith("Reads from the scratchpad an observation previously saved")
