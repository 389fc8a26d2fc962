"""The same work through LangChain's Deep Agents (`bench_cost.py --peer`; the optional `bench`
extra): `create_deep_agent` with `ChatAnthropic` pointed at the same cache-simulating fake, its
own Anthropic prompt-caching middleware, its own summarization at the same window (its model
profile's `max_input_tokens`), an in-memory checkpointer, driven in process.

The work is mapped action for action (`_cost_work.Dialect`): the same files read by an `fs_read`
tool of the same name that returns the same JSON as Palimpsest's (so the same tool results and
sizes); the notepad appends and scratchpad edits go to its files (/notepad.md, /scratchpad.md:
`write_file` for the first line, then `edit_file` appending after the last line, as an agent
appends with a find-and-replace tool); the task's begin and end write its file /task.md (it has
no task scoping, and 0.7's default agent no planning tool); the child is its `task` sub-agent
(general-purpose).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from _cost_work import NOTEPAD_EVERY, SCRATCHPAD_EVERY, Dialect, Model, child_task
from bench_cost import Clock, Run, _SeededIds

MODEL = "claude-sonnet-4-6"


def _note_line(n: int) -> str:
    return f"- step {n}: batch figures noted\n"


def _scratch_line(n: int) -> str:
    return f"step {n}: check shards\n"


def _append(path: str, line: Any, every: int) -> Any:
    def action(n: int) -> tuple[str, dict[str, Any]]:
        if n == every:
            return "write_file", {"file_path": path, "content": line(n)}
        return "edit_file", {
            "file_path": path,
            "old_string": line(n - every),
            "new_string": line(n - every) + line(n),
        }

    return action


DEEP_AGENTS = Dialect(
    read=lambda path: ("fs_read", {"path": path}),
    note=_append("/notepad.md", _note_line, NOTEPAD_EVERY),
    scratch=_append("/scratchpad.md", _scratch_line, SCRATCHPAD_EVERY),
    task_begin=(
        "write_file",
        {"file_path": "/task.md", "content": "audit: read the audit logs (in progress)\n"},
    ),
    task_end=(
        "write_file",
        {
            "file_path": "/task.md",
            "content": "audit (done): the audit logs show retries on shard 4; nothing else stands out.\n",
        },
    ),
    child=lambda path: ("task", {"description": child_task(path), "subagent_type": "general-purpose"}),
)


def run_peer(args: argparse.Namespace, work: Any, root: Path) -> Run:
    from _cost_report import Request
    from deepagents import create_deep_agent
    from langchain_anthropic import ChatAnthropic
    from langchain_core.messages import HumanMessage
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver

    from tests.fake_anthropic import FakeAnthropicServer

    @tool
    def fs_read(path: str) -> str:
        """Read a UTF-8 text file of the shared folder; returns {path, bytes, encoding, content}."""
        data = (root / path).read_bytes()
        content = data.decode()
        return json.dumps({"path": path, "bytes": len(data), "encoding": "utf-8", "content": content})

    if not args.random_ids:
        # Its summarization names the file it offloads the history to with a random id, which the
        # model reads: drawn from a seeded generator, as Palimpsest's ids are (`seeded_ids`).
        from deepagents.middleware import summarization

        summarization.uuid = _SeededIds(args.seed)  # type: ignore[attr-defined]
    clock = Clock()
    model = Model(
        work,
        DEEP_AGENTS,
        is_summary=lambda body: not body.get("tools"),
        tick=clock.advance,
        step_seconds=args.step_seconds,
    )
    times: dict[int, float] = {}

    def answer(body: dict[str, Any]) -> Any:
        reply = model(body)
        times[id(body)] = clock()
        return reply

    with FakeAnthropicServer(token_ratio=args.ratio, cache_rules="anthropic", clock=clock) as fake:
        fake.default_reply = answer
        chat = ChatAnthropic(
            model_name=MODEL,
            base_url=fake.url,
            api_key="bench-key",
            max_retries=0,
            max_tokens=2048,
            profile={"max_input_tokens": args.window},
        )
        agent: Any = create_deep_agent(model=chat, tools=[fs_read], checkpointer=InMemorySaver())
        config = {"configurable": {"thread_id": "cost"}, "recursion_limit": 200}
        for message in work.messages:
            clock.advance(args.think_seconds)
            agent.invoke({"messages": [HumanMessage(content=message)]}, config)
    requests: list[Request] = []
    for record in fake.requests:
        if record.usage is None:
            continue
        purpose = "summary" if not record.body.get("tools") else "turn"
        stream = "summary"
        if purpose == "turn":
            child = "Subtask: " in json.dumps(record.body.get("messages", [])[:1])
            purpose, stream = ("child", "child") if child else ("turn", "parent")
        requests.append(
            Request(
                len(requests), stream, purpose, times[id(record.body)], record.body, record.usage, args.ratio
            )
        )
    return Run(
        side="Deep Agents",
        requests=requests,
        steps=model.steps + model.child_steps,
        compactions=sum(1 for r in requests if r.purpose == "summary"),
        masked_results=0,
        refused=sum(1 for r in fake.requests if r.usage is None),
    )
