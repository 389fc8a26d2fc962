"""The fake Messages API's prompt cache by Anthropic's rules (``cache_rules="anthropic"``), one rule
a test, through the real ``anthropic`` SDK; time moves on an injected clock."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from tests.fake_anthropic import FakeAnthropicServer, count_tokens, text
from tests.prompt_cache import CacheRuleError, CacheSimulator, breakpoints_check, min_cacheable_tokens

SONNET = "claude-sonnet-4-6"
HAIKU = "claude-haiku-4-5"
CC = {"type": "ephemeral"}
CC_1H = {"type": "ephemeral", "ttl": "1h"}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def server(clock: Clock) -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer(cache_rules="anthropic", clock=clock) as srv:
        yield srv


@pytest.fixture
def client(server: FakeAnthropicServer) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(api_key="k", base_url=server.url, max_retries=0) as c:
        yield c


def block(words: int, tag: str, cache: dict[str, Any] | None = None) -> dict[str, Any]:
    """A text block of about `words` tokens, named by `tag`, optionally a breakpoint."""
    out: dict[str, Any] = {"type": "text", "text": f"{tag}:" + " word" * words}
    if cache is not None:
        out["cache_control"] = cache
    return out


def tokens(*blocks: dict[str, Any]) -> int:
    return sum(count_tokens(b) for b in blocks)


def call(client: anthropic.Anthropic, model: str = SONNET, **kwargs: Any) -> anthropic.types.Usage:
    params: dict[str, Any] = {"model": model, "max_tokens": 100}
    return client.messages.create(**(params | kwargs)).usage


def usage_of(u: anthropic.types.Usage) -> tuple[int, int, int]:
    return (u.cache_read_input_tokens or 0, u.cache_creation_input_tokens or 0, u.input_tokens)


def chat(*blocks: dict[str, Any]) -> list[dict[str, Any]]:
    """Alternating one-block messages, user first."""
    return [{"role": ("user", "assistant")[i % 2], "content": [b]} for i, b in enumerate(blocks)]


def test_breakpoint_writes_its_prefix_and_a_later_request_reads_it(client: anthropic.Anthropic) -> None:
    system = [block(1500, "sys", CC)]
    question = block(20, "q")
    first = call(client, system=system, messages=chat(question))
    assert usage_of(first) == (0, tokens(*system), tokens(question))
    assert first.cache_creation is not None
    assert first.cache_creation.ephemeral_5m_input_tokens == tokens(*system)
    assert first.cache_creation.ephemeral_1h_input_tokens == 0
    second = call(client, system=system, messages=chat(block(30, "other")))
    assert usage_of(second) == (tokens(*system), 0, tokens(block(30, "other")))


def test_prefix_order_is_tools_then_system_then_messages(client: anthropic.Anthropic) -> None:
    tools = [{"name": "t", "description": "d", "input_schema": {"type": "object"}}]
    system = [block(1500, "sys")]
    history = [block(200, "a"), block(200, "b"), block(200, "c", CC)]
    call(client, tools=tools, system=system, messages=chat(*history))
    # A message changed after the system prompt: the tools and system are still a cached prefix
    # only if a breakpoint wrote there; here only the last message's was, so nothing is read.
    changed_message = [history[0], block(200, "B"), history[2]]
    assert usage_of(call(client, tools=tools, system=system, messages=chat(*changed_message)))[0] == 0
    # The same request again reads it all; a changed tool (first in the prefix) reads nothing.
    total = tokens(*tools, *system, *history)
    assert usage_of(call(client, tools=tools, system=system, messages=chat(*history))) == (total, 0, 0)
    other_tools = [{"name": "u", "description": "d", "input_schema": {"type": "object"}}]
    read, written, _ = usage_of(call(client, tools=other_tools, system=system, messages=chat(*history)))
    assert (read, written) == (0, tokens(*other_tools, *system, *history))
    # A changed system prompt (second in the prefix) reads nothing either, though the tools match.
    other_system = [block(1500, "SYS")]
    assert usage_of(call(client, tools=tools, system=other_system, messages=chat(*history)))[0] == 0


def test_five_breakpoints_are_refused_like_the_real_api(
    server: FakeAnthropicServer, client: anthropic.Anthropic
) -> None:
    server.enqueue(text("never sent"))
    five = [block(300, str(i), CC) for i in range(5)]
    with pytest.raises(anthropic.BadRequestError) as failure:
        call(client, messages=chat(*five))
    assert failure.value.status_code == 400
    assert failure.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    assert "maximum of 4" in failure.value.body["error"]["message"]  # type: ignore[index]
    assert server.pending == 1 and server.requests[0].usage is None  # nothing answered
    assert call(client, messages=chat(*five[:4])).cache_creation_input_tokens == tokens(*five[:4])


def test_lookback_reads_20_blocks_before_a_breakpoint_and_no_further(client: anthropic.Anthropic) -> None:
    system = block(1200, "sys")
    history = [block(10, f"m{i}") for i in range(30)]
    call(client, system=[dict(system, cache_control=CC)], messages=chat(*history[:1]))  # writes block 0
    base = tokens(system)
    # Later requests mark only their last message. 21 blocks after the written entry, with
    # nothing written in between: the entry is out of the breakpoint's reach.
    far = [*history[:20], dict(history[20], cache_control=CC)]
    assert usage_of(call(client, system=[system], messages=chat(*far)))[0:2] == (
        0,
        base + tokens(*history[:21]),
    )
    # 20 blocks after it: the lookback reaches it (the entry the request above wrote is further on).
    reach = [*history[:19], dict(history[19], cache_control=CC)]
    assert usage_of(call(client, system=[system], messages=chat(*reach)))[0:2] == (
        base,
        tokens(*history[:20]),
    )


def test_lookback_finds_the_longest_prefix_an_earlier_request_wrote(client: anthropic.Anthropic) -> None:
    history = [block(400, f"m{i}") for i in range(6)]
    marked = [*history[:3], dict(history[3], cache_control=CC)]
    call(client, messages=chat(*marked))
    longer = [*history[:5], dict(history[5], cache_control=CC)]
    assert usage_of(call(client, messages=chat(*longer))) == (
        tokens(*history[:4]),
        tokens(*history[4:]),
        0,
    )


def test_prefixes_under_the_minimum_are_neither_written_nor_read(client: anthropic.Anthropic) -> None:
    short = [block(900, "sys", CC)]
    assert tokens(*short) < 1024
    for _ in range(2):
        assert usage_of(call(client, system=short, messages=chat(block(5, "q")))) == (
            0,
            0,
            tokens(*short, block(5, "q")),
        )
    # Haiku's minimum is 2,048: a 1,500-token prefix is cached for Sonnet, not for Haiku.
    middle = [block(1500, "mid", CC)]
    assert 1024 <= tokens(*middle) < 2048
    assert (
        call(client, model=HAIKU, system=middle, messages=chat(block(5, "q"))).cache_creation_input_tokens
        == 0
    )
    assert call(client, model=SONNET, system=middle, messages=chat(block(5, "q"))).cache_creation_input_tokens
    assert (min_cacheable_tokens(HAIKU), min_cacheable_tokens(SONNET)) == (2048, 1024)


def test_entries_live_five_minutes_refreshed_by_each_read(client: anthropic.Anthropic, clock: Clock) -> None:
    system = block(1500, "sys")
    call(client, system=[dict(system, cache_control=CC)], messages=chat(block(5, "q")))
    # Later requests mark only their own question: the system prompt's entry is only read (by
    # the lookback), never written again, so only the reads keep it alive.
    clock.now += 299
    asked = chat(block(5, "q1", CC))
    assert call(client, system=[system], messages=asked).cache_read_input_tokens == tokens(system)
    clock.now += 299  # 598 s after the write, 299 after the read that refreshed it
    asked = chat(block(5, "q2", CC))
    assert call(client, system=[system], messages=asked).cache_read_input_tokens == tokens(system)
    clock.now += 301
    expired = call(client, system=[system], messages=chat(block(5, "q3", CC)))
    assert usage_of(expired)[0:2] == (0, tokens(system, block(5, "q3")))


def test_one_hour_ttl(client: anthropic.Anthropic, clock: Clock) -> None:
    system = [block(1500, "sys", CC_1H)]
    q = chat(block(5, "q"))
    first = call(client, system=system, messages=q)
    assert first.cache_creation is not None
    assert first.cache_creation.ephemeral_1h_input_tokens == tokens(*system)
    assert first.cache_creation.ephemeral_5m_input_tokens == 0
    clock.now += 3000
    assert call(client, system=system, messages=q).cache_read_input_tokens == tokens(*system)
    clock.now += 3601
    assert call(client, system=system, messages=q).cache_read_input_tokens == 0


def test_mixed_ttls_split_the_written_tokens_and_must_be_ordered(client: anthropic.Anthropic) -> None:
    system = [block(1500, "sys", CC_1H)]
    history = [block(300, "a"), block(300, "b", CC)]
    u = call(client, system=system, messages=chat(*history))
    assert u.cache_creation is not None
    assert (u.cache_creation.ephemeral_1h_input_tokens, u.cache_creation.ephemeral_5m_input_tokens) == (
        tokens(*system),
        tokens(*history),
    )
    with pytest.raises(anthropic.BadRequestError):
        call(client, system=[block(1500, "sys", CC)], messages=chat(block(300, "a"), block(300, "b", CC_1H)))


def test_usage_adds_up_to_the_prompt_with_the_tail_uncached(
    server: FakeAnthropicServer, client: anthropic.Anthropic
) -> None:
    system = [block(1500, "sys", CC)]
    history = [block(100, "a"), block(100, "b")]  # after the last breakpoint: never cached
    for _ in range(2):
        read, written, uncached = usage_of(call(client, system=system, messages=chat(*history)))
        assert uncached == tokens(*history)
        assert read + written + uncached == server.count_prompt_tokens(server.requests[-1].body)
    record = server.requests[-1]
    assert record.cache is not None and (record.cache.read_blocks, record.cache.written_blocks) == (1, 1)


def test_the_same_text_in_another_role_is_another_prefix(client: anthropic.Anthropic) -> None:
    words = [block(700, "x"), block(700, "y", CC)]
    call(client, messages=chat(*words))
    swapped = [{"role": "user", "content": [words[0], words[1]]}]
    assert call(client, messages=swapped).cache_read_input_tokens == 0


def test_the_simulator_alone_and_its_refusals() -> None:
    clock = Clock()
    simulator = CacheSimulator(lambda b: 600, clock=clock)
    body = {"model": SONNET, "messages": chat(block(1, "a"), block(1, "b", CC))}
    assert simulator.apply(body).written_tokens == 1200 and len(simulator) == 1
    clock.now += 301
    assert len(simulator) == 0
    with pytest.raises(CacheRuleError):
        breakpoints_check({"messages": chat(block(1, "a", {"type": "persistent"}))})
    with pytest.raises(CacheRuleError):
        breakpoints_check({"messages": chat(block(1, "a", {"type": "ephemeral", "ttl": "2h"}))})
    with pytest.raises(ValueError):
        FakeAnthropicServer(cache_rules="openai")


def test_default_mode_is_the_crude_simulation() -> None:
    """Without cache_rules the fake keeps its old behaviour: any number of breakpoints, no minimum."""
    with FakeAnthropicServer() as crude, anthropic.Anthropic(api_key="k", base_url=crude.url) as c:
        five = [block(10, str(i), CC) for i in range(5)]
        assert call(c, messages=chat(*five)).cache_creation_input_tokens == tokens(*five)
        assert crude.requests[0].cache is None


def test_top_level_cache_control_marks_the_last_block_and_takes_a_slot(client: anthropic.Anthropic) -> None:
    """Automatic caching: the breakpoint rides the last block, so a growing chat reads what the
    previous request wrote; it counts against the 4 breakpoints."""
    history = [block(700, "a"), block(700, "b"), block(100, "c")]
    first = call(client, messages=chat(*history[:2]), cache_control=CC)
    assert usage_of(first) == (0, tokens(*history[:2]), 0)
    second = call(client, messages=chat(*history), cache_control=CC)
    assert usage_of(second) == (tokens(*history[:2]), tokens(history[2]), 0)
    four = [block(300, str(i), CC) for i in range(4)] + [block(5, "tail")]
    with pytest.raises(anthropic.BadRequestError):
        call(client, messages=chat(*four), cache_control=CC)
    assert call(client, messages=chat(*four[:4]), cache_control=CC).cache_read_input_tokens == 0


def test_a_changed_tool_choice_invalidates_the_messages_not_the_tools_nor_the_system(
    client: anthropic.Anthropic,
) -> None:
    tools = [
        {
            "name": "t",
            "description": "a tool " + "word " * 700,
            "input_schema": {"type": "object", "properties": {}},
            "cache_control": CC,
        }
    ]
    system = [block(700, "sys", CC)]
    history = chat(block(1500, "history"), block(20, "answer"), block(20, "q", CC))
    first = call(client, tools=tools, system=system, messages=history)
    assert usage_of(first)[0] == 0
    same = call(client, tools=tools, system=system, messages=history, tool_choice={"type": "auto"})
    assert usage_of(same) == (usage_of(first)[1], 0, 0)  # absent is auto: everything is read
    other = call(client, tools=tools, system=system, messages=history, tool_choice={"type": "none"})
    read, written, _ = usage_of(other)
    assert read == count_tokens(tools[0]) + tokens(*system)
    assert written == tokens(*[b for m in history for b in m["content"]])
