"""The scripted work of `bench_cost.py`: what the user asks, what the files hold, and the model
that answers the fake Messages API (an agent at work, its child, and a summarizer), for
Palimpsest and for the peer (Deep Agents) alike: the same plan, only the tools' names differ.

The plan of each user turn is fixed: read its files one by one (fs_read, 1-3 KB each), then
answer with a report. Turn TASK_TURN wraps its reads in a task (Palimpsest: begin_task / end_task;
the peer, which has no task scoping: its write_todos planning tool), turn CHILD_TURN hands one
file to a child (spawn_session; the peer: its `task` sub-agent). Memory edits ride along: every
4th model step of the parent also appends a line to the notepad (the peer: its file
/notepad.md), every 6th also edits the scratchpad notes (the peer: /scratchpad.md), as extra tool
calls of the same step (a step whose action is the final answer makes them first, as a step of
their own). The model's state is the plan's cursor per turn: the engine calls it one request at a
time, so the same run answers the same way every time.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.fake_anthropic import Reply, text

WORDS = " ".join(
    [
        "the service retries each batch before the worker pool drains its queue and the scheduler records "
        "latency per shard while the gateway rotates credentials for every tenant so that exports stay "
        "consistent across regions after the migration of the ledger tables to the new cluster",
    ]
).split()
TASK_TURN = 10
CHILD_TURN = 20
TURN_RE = re.compile(r"^Task (\d+):")
CHILD_RE = re.compile(r"^Subtask: read (\S+) ")
NOTEPAD_EVERY = 4
SCRATCHPAD_EVERY = 6


def prose(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))


def log_file(rng: random.Random, name: str, size: int) -> str:
    """A log of about `size` bytes (80-byte lines)."""
    lines: list[str] = []
    while sum(len(line) + 1 for line in lines) < size:
        lines.append(
            f"2026-03-{rng.randint(1, 28):02d} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d} "
            f"{rng.choice(('INFO', 'INFO', 'DEBUG', 'WARN'))} {name} worker-{rng.randint(1, 9)} batch "
            f"{rng.randint(1000, 99999)} {rng.choice(WORDS)} in {rng.randint(2, 900)} ms"
        )
    return "\n".join(lines) + "\n"


@dataclass
class Work:
    """The user's messages and the files, the same for both sides."""

    turns: int = 30
    seed: int = 32
    messages: list[str] = field(init=False)
    files: dict[str, str] = field(init=False)
    turn_files: list[list[str]] = field(init=False)

    def __post_init__(self) -> None:
        rng = random.Random(self.seed)
        self.messages, self.files, self.turn_files = [], {}, []
        for turn in range(self.turns):
            names = [f"t{turn:02d}_{part}.log" for part in "abcd"[: 2 + turn % 3]]  # 2, 3, 4 files
            for name in names:
                self.files[name] = log_file(rng, name.removesuffix(".log"), rng.randint(1000, 3000))
            self.turn_files.append(names)
            self.messages.append(
                f"Task {turn}: {prose(rng, 40, 90)}. Read {', '.join(names)} and report what matters."
            )
        self.child_file = f"t{CHILD_TURN:02d}_child.log"
        self.files[self.child_file] = log_file(rng, "child", 2500)


@dataclass(frozen=True)
class Dialect:
    """How one side names the plan's actions: (tool name, input) per action."""

    read: Callable[[str], tuple[str, dict[str, Any]]]
    note: Callable[[int], tuple[str, dict[str, Any]]]
    scratch: Callable[[int], tuple[str, dict[str, Any]]]
    task_begin: tuple[str, dict[str, Any]]
    task_end: tuple[str, dict[str, Any]]
    child: Callable[[str], tuple[str, dict[str, Any]]]


def child_task(path: str) -> str:
    return f"Subtask: read {path} and report the slowest batch in it."


PALIMPSEST = Dialect(
    read=lambda path: ("fs_read", {"path": path}),
    note=lambda n: (
        "update_notepad",
        {"operation": "append", "content": f"- step {n}: batch figures noted\n"},
    ),
    scratch=lambda n: (
        "session_scratchpad",
        {"action": "append_notes", "content": f"step {n}: check shards"},
    ),
    task_begin=("begin_task", {"name": "audit", "goal": "read the audit logs"}),
    task_end=("end_task", {"summary": "The audit logs show retries on shard 4; nothing else stands out."}),
    child=lambda path: ("spawn_session", {"task": child_task(path), "title": "child"}),
)


@dataclass
class Model:
    """Answers the fake's requests for one side. `is_summary(body)`: a summary call."""

    work: Work
    dialect: Dialect
    is_summary: Callable[[dict[str, Any]], bool]
    is_warning: Callable[[dict[str, Any]], bool] = lambda body: False
    tick: Callable[[float], None] = lambda seconds: None
    step_seconds: float = 4.0
    steps: int = 0  # the parent's model steps (memory edits count them)
    child_steps: int = 0
    summaries: int = 0
    warnings: int = 0
    _cursor: dict[Any, int] = field(default_factory=dict)
    _ids: int = 0
    _last_turn: str | None = None

    def _id(self) -> str:
        self._ids += 1
        return f"toolu_{self._ids:024d}"

    def _call(self, action: tuple[str, dict[str, Any]]) -> dict[str, Any]:
        return {"type": "tool_use", "id": self._id(), "name": action[0], "input": action[1]}

    def __call__(self, body: dict[str, Any]) -> Reply:
        self.tick(self.step_seconds)
        if self.is_summary(body):
            self.summaries += 1
            return text(summary_of(body))
        if self.is_warning(body):
            self.warnings += 1
            self.steps += 1
            return text("My notes are up to date.")
        where = running(body)
        if where is None and self._last_turn is not None:
            # The peer's summarization may summarize the running turn's request away: the
            # turn goes on (Palimpsest keeps it verbatim, so it never gets here).
            where = ("turn", self._last_turn)
        if where is None:
            raise ValueError("a request without a task or a subtask")
        kind, value = where
        if kind == "child":
            self.child_steps += 1
            done = self._cursor.get(("child", value), 0)
            self._cursor[("child", value)] = done + 1
            if done == 0:
                return Reply([self._call(self.dialect.read(value))], stop_reason="tool_use")
            return text(f"The slowest batch in {value} took 897 ms (batch 4411).")
        turn = int(value)
        self._last_turn = value
        self.steps += 1
        plan = self.plan(turn)
        done = self._cursor.get(turn, 0)
        action = plan[done] if done < len(plan) else None
        edits = []
        if self.steps % NOTEPAD_EVERY == 0:
            edits.append(self.dialect.note(self.steps))
        if self.steps % SCRATCHPAD_EVERY == 0:
            edits.append(self.dialect.scratch(self.steps))
        if action is None:  # the report, after the memory edits of this step if any
            if edits:
                return Reply([self._call(e) for e in edits], stop_reason="tool_use")
            self._cursor[turn] = done + 1
            rng = random.Random(turn)
            return text(f"Report for task {turn}: {prose(rng, 60, 120)}.")
        self._cursor[turn] = done + 1
        return Reply([self._call(action)] + [self._call(e) for e in edits], stop_reason="tool_use")

    def plan(self, turn: int) -> list[tuple[str, dict[str, Any]]]:
        reads = [self.dialect.read(path) for path in self.work.turn_files[turn]]
        if turn == TASK_TURN:
            return [self.dialect.task_begin, *reads, self.dialect.task_end]
        if turn == CHILD_TURN:
            return [reads[0], self.dialect.child(self.work.child_file), *reads[1:]]
        return reads


def _texts(body: dict[str, Any]) -> list[tuple[str, str]]:
    """(role, text) of every text block of the messages, in order."""
    out = []
    for message in body.get("messages") or []:
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": str(content)}]
        for block in blocks:
            if isinstance(block, dict) and block.get("type") == "text":
                out.append((message.get("role", ""), block.get("text", "")))
    return out


def running(body: dict[str, Any]) -> tuple[str, str] | None:
    """The running turn: ("child", its file) for a child's request, else ("turn", its number)."""
    for role, words in reversed(_texts(body)):
        if role != "user":
            continue
        if match := CHILD_RE.match(words):
            return "child", match.group(1)
        if match := TURN_RE.match(words):
            return "turn", match.group(1)
    return None


def summary_of(body: dict[str, Any]) -> str:
    """A bounded, deterministic summary: the task numbers the request mentions, and a paragraph."""
    seen = sorted({int(n) for n in re.findall(r"Task (\d+):", json.dumps(body))})
    rng = random.Random(len(seen))
    listed = ", ".join(str(n) for n in seen[-12:])
    return f"The user asked for tasks {listed}; each was read and reported. {prose(rng, 120, 160)}."
