"""`bench_continuity.py --sessions N`: continuity across sessions (issue 33). The facts are told in
the first of N sessions (the whole work script), N-2 short sessions follow, each session is
ended, and the questions come in the last: what the agent can still reach there is what outlived
its sessions. Two arms: **agent** (every session is one of the same agent: the scripted agent also
keeps names, decisions and findings in its learned text with `edit_system_prompt`, numbers in
`agent_state`) and **no agent** (the same sessions without one: a new session starts with an
empty notepad and scratchpad). The fake Messages API simulates Anthropic's prompt cache, so the
run also shows what an `edit_system_prompt` costs the running session: its system prompt stays
as it was (pinned for the epoch) until its next compaction.
"""

from __future__ import annotations

import argparse
import asyncio
import re
from dataclasses import dataclass, field
from typing import Any

ARMS = ("agent", "no agent")
SOURCES = (
    "learned",
    "state",
    "notepad",
    "scratchpad",
    "summary",
    "history",
    "archive",
    "recall",
    "observation",
)


@dataclass
class SessionsResult:
    arm: str
    warning: str
    answers: dict[int, Any]
    facts: int
    sessions: int
    edits: int = 0  # edit_system_prompt calls in the first session
    after_edit: int = 0  # requests of the first session right after one, before any compaction
    after_edit_same_system: int = 0  # ... whose system prompt was the previous request's
    after_edit_read: int = 0  # their input tokens read from the cache
    after_edit_input: int = 0  # their input tokens
    first_after_compaction_learned: int = 0  # first requests of an epoch showing the edits
    compactions: int = 0
    seconds: float = 0.0
    by_source: dict[str, int] = field(default_factory=dict)

    @property
    def reached(self) -> list[Any]:
        return [a for a in self.answers.values() if a.value is not None]


def run(
    args: argparse.Namespace, script: Any, arm: str, warning: str, *, recall: bool = True
) -> SessionsResult:
    from _continuity import Agent, is_summary_request, running_turn
    from django.conf import settings

    from sessions_app.models import Archive, ToolCall
    from tests.fake_anthropic import FakeAnthropicServer

    skips = frozenset() if recall else frozenset({"recall"})
    label = arm if args.reader_recall == "on" else f"{arm}, reader {'with' if recall else 'without'} recall"
    agent = Agent(warning=warning, reader_tool_calls=args.reader_calls, reader_skips=skips)
    with FakeAnthropicServer(
        strict=True, window=args.window, token_ratio=args.ratio, cache_rules="anthropic"
    ) as fake:
        settings.ANTHROPIC_BASE_URL = fake.url
        fake.default_reply = agent
        first_id = asyncio.run(_sessions(args, script, arm, warning, label))
    result = SessionsResult(
        arm=label, warning=warning, answers=agent.answers, facts=len(script.facts), sessions=args.sessions
    )
    result.compactions = Archive.objects.filter(session_id=first_id).count()
    result.edits = ToolCall.objects.filter(session_id=first_id, name="edit_system_prompt").count()
    # The first session's turn requests, in order (summary calls have a system prompt of their own).
    previous: dict[str, Any] | None = None
    edited_since_epoch = False
    for record in fake.requests:
        body = record.body
        if is_summary_request(body) or record.usage is None:
            continue
        if running_turn(body).words.startswith(("Question ", "Status check")):
            break  # the later sessions
        epoch_start = previous is not None and body["messages"][0] != previous["messages"][0]
        if epoch_start and edited_since_epoch:
            joined = "\n".join(b["text"] for b in body.get("system", []))
            result.first_after_compaction_learned += int("## Learned Instructions\n- " in joined)
            edited_since_epoch = False
        if previous is not None and not epoch_start and _last_call_was_an_edit(previous, body):
            result.after_edit += 1
            result.after_edit_same_system += int(body.get("system") == previous.get("system"))
            usage = record.usage
            result.after_edit_read += int(usage["cache_read_input_tokens"])
            result.after_edit_input += int(
                usage["input_tokens"]
                + usage["cache_read_input_tokens"]
                + usage["cache_creation_input_tokens"]
            )
            edited_since_epoch = True
        previous = body
    for answer in result.reached:
        result.by_source[answer.source] = result.by_source.get(answer.source, 0) + 1
        fact = script.facts[answer.question - 1]
        assert answer.value == fact.value, (arm, answer, fact)
    assert len(agent.answers) == len(script.facts), f"{arm}: {len(agent.answers)} questions answered"
    return result


def _last_call_was_an_edit(previous: dict[str, Any], body: dict[str, Any]) -> bool:
    """Whether `body` answers an `edit_system_prompt` call of `previous` (its next step)."""
    del previous  # the step's own request shows the call it answers
    answered = body["messages"][-2] if len(body["messages"]) >= 2 else {}
    return answered.get("role") == "assistant" and any(
        b.get("type") == "tool_use" and b.get("name") == "edit_system_prompt"
        for b in answered.get("content", [])
    )


async def _sessions(args: argparse.Namespace, script: Any, arm: str, warning: str, label: str) -> Any:
    from asgiref.sync import sync_to_async

    from sessions_app.engine import agents as engine_agents
    from sessions_app.engine import runner
    from sessions_app.engine import sessions as engine_sessions
    from sessions_app.models import Turn

    agent = None
    if arm == "agent":
        # The bench writes no tools: `define_tool` and `remove_tool` are left out of the agent's
        # sessions, whose 8,000-token window the other tools fill enough.
        agent = await sync_to_async(engine_agents.agent_create)(
            owner_name="",
            name=re.sub(r"[^a-z0-9]+", "-", f"bench {label} {warning}".lower()).strip("-")[:64],
            author="operator:bench",
            settings={"knowledge": {"tool_authoring": False}},
        )

    async def session_new() -> Any:
        return await sync_to_async(engine_sessions.session_create)(
            owner=None,
            model="claude-sonnet-4-6",
            context_window=args.window,
            compact_threshold=args.threshold,
            agent=agent,
        )

    async def turn(session: Any, content: str) -> None:
        turn_id = await runner.turn_start(session_id=session.id, content=content)
        stop = await runner.turn_wait(turn_id)
        if stop != "end_turn":
            row = await sync_to_async(Turn.objects.get)(pk=turn_id)
            raise AssertionError(f"turn {content[:40]!r} ended with {stop}: {row.error}")

    first = await session_new()
    for message in script.messages:
        await turn(first, message)
    await engine_agents.session_end(session_id=first.id, reason="operator")
    for number in range(2, args.sessions):
        middle = await session_new()
        await turn(middle, f"Status check {number}: nothing new today, just confirm you are ready.")
        await engine_agents.session_end(session_id=middle.id, reason="operator")
    last = await session_new()
    for question in script.questions():
        await turn(last, question)
    await engine_agents.session_end(session_id=last.id, reason="operator")
    await runner.turns_wait_idle(timeout=60)
    return first.id


def report(args: argparse.Namespace, script: Any, results: list[SessionsResult]) -> None:
    from _continuity import facts_table

    print()
    print(
        f"Across {args.sessions} sessions: the facts told in the first, each session ended, the "
        f"questions in the last (window {args.window}, reader: at most {args.reader_calls} tool calls)."
    )
    print()
    print(f"| arm | warning step | facts reached | found in: {' / '.join(SOURCES)} |")
    print("|---|---|---:|---|")
    for r in results:
        by = " / ".join(str(r.by_source.get(s, 0)) for s in SOURCES)
        print(
            f"| {r.arm} | {r.warning} | {len(r.reached)}/{r.facts} ({len(r.reached) / r.facts:.0%}) | {by} |"
        )
    print()
    print(
        "| arm | warning step | compactions of the first session | edit_system_prompt calls | requests "
        "right after one (same epoch) | of which with the system prompt unchanged | their input read from "
        "the cache | first requests of an epoch showing the edits |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for r in results:
        share = r.after_edit_read / r.after_edit_input if r.after_edit_input else 0.0
        print(
            f"| {r.arm} | {r.warning} | {r.compactions} | {r.edits} | {r.after_edit} "
            f"| {r.after_edit_same_system} | {share:.0%} | {r.first_after_compaction_learned} |"
        )
    print()
    facts_table(script, results)
