"""The scripted session of `bench_continuity.py`: its facts, its files and messages, and the
scripted model that answers the fake Messages API (an agent at work, a reader at question time,
and a summarizer).

The model is a function of the request alone: what it does next is read from the request's
messages (the running turn's user message, the tool calls it already made in this turn, the
results it got), never from state kept between calls. So the reader can only answer from what its
request holds and what its tools fetch.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from typing import Any

from memory_app.notepad.prompts import NOTEPAD_CHANGED_LEAD, NOTEPAD_HEADING
from memory_app.scratchpad.prompts import BLOCK_START
from sessions_app.common.types import StoredMessage
from sessions_app.engine.compaction.summary import is_shared_summary_text, transcript_lines
from sessions_app.engine.prompts import (
    COMPACTION_COMBINE_INSTRUCTION,
    COMPACTION_PREVIOUS_SUMMARY_HEADING,
    COMPACTION_SUMMARY_SYSTEM_PROMPT,
    LEARNED_HEADING,
    PRE_COMPACTION_WARNING,
)
from tests.fake_anthropic import Reply, text, tool_use

# ---------------------------------------------------------------------------
# The facts
# ---------------------------------------------------------------------------
NUMBER, DECISION, NAME, FINDING, DETAIL = "number", "decision", "name", "finding", "detail"
# How the user (or a file) states each kind; the agent recognizes the first four by their marker.
MARKERS = {NUMBER: "Remember", DECISION: "Decision", NAME: "For the record", FINDING: "FINDING"}
# A value ends at the first of these (a sentence's end, a JSON string's end or escape).
VALUE = r"([^.,;\n\]\"\\]+)"
KINDS = {marker: kind for kind, marker in MARKERS.items()} | {"Finding": FINDING}
MEMORY_TOOLS = {"update_notepad", "session_scratchpad"}
DATA_TOOLS = {"fs_read"}
MARKED_FACT = re.compile(
    r"(Remember|Decision|For the record|FINDING|Finding): the ([a-z][a-z -]*?) is " + VALUE
)
SUMMARY_PREFIX = "[Summary of the conversation so far"
PLACEHOLDER_ID = re.compile(r"Read it with scratchpad_read \(scratchpad_id ([0-9a-f]+)\)")
QUESTION = re.compile(r"^Question (\d+) of \d+: what is the (.+?)\?")
TASK = re.compile(r"Task (\d+):")
FILES = re.compile(r"Read ((?:[\w.-]+\.log(?:, | and )?)+) and report")


@dataclass(frozen=True)
class Fact:
    kind: str
    key: str
    value: str
    turn: int  # the work turn that plants it

    @property
    def sentence(self) -> str:
        """How the user (or a file, for findings and details) states it."""
        if self.kind == DETAIL:
            return f"roster note: the {self.key} is {self.value}"
        return f"{MARKERS[self.kind]}: the {self.key} is {self.value}."


def facts_for(turns: int) -> list[Fact]:
    """Twelve facts: seven in the first six work turns, three in the middle, two in the last
    (a long task that reads six files)."""
    mid, last = turns // 2, turns - 1
    return [
        Fact(NUMBER, "budget code", "4471", 0),
        Fact(DECISION, "release day", "Thursday", 1),
        Fact(NAME, "release reviewer", "Ingrid Vasquez", 1),
        Fact(FINDING, "failing shard", "17", 2),
        Fact(DETAIL, "on-call engineer", "Tomasz Lindqvist", 3),
        Fact(NUMBER, "staging port", "8443", 4),
        Fact(DECISION, "database engine", "PostgreSQL", 5),
        Fact(NAME, "security contact", "Amara Okafor", mid),
        Fact(FINDING, "slowest endpoint", "/v2/export", mid + 1),
        Fact(DECISION, "rollback window", "48 hours", mid + 2),
        Fact(NUMBER, "invoice batch", "90210", last),
        Fact(DETAIL, "cache region", "eu-west-3", last),
    ]


# ---------------------------------------------------------------------------
# The session's text: prose, log files, work messages, questions
# ---------------------------------------------------------------------------
WORDS = " ".join(
    [
        "the service retries each batch before the worker pool drains its queue and the scheduler",
        "records latency per shard while the gateway rotates credentials for every tenant so that",
        "exports stay consistent across regions after the migration of the ledger tables to the new",
        "cluster with its replicas and the audit trail keeps every change for review",
    ]
).split()
LAST_TURN_FILES = 6


def prose(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))


def log_file(rng: random.Random, name: str, lines: int, extra: str | None) -> str:
    """A log of `lines` lines (about 80 bytes each); `extra` goes in the middle."""
    levels = ("INFO", "INFO", "INFO", "DEBUG", "WARN")
    out = [
        f"2026-03-{rng.randint(1, 28):02d} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:"
        f"{rng.randint(0, 59):02d} {rng.choice(levels)} {name} worker-{rng.randint(1, 9)} batch "
        f"{rng.randint(1000, 99999)} {rng.choice(WORDS)} {rng.choice(WORDS)} in {rng.randint(2, 900)} ms"
        for _ in range(lines)
    ]
    if extra is not None:
        out.insert(lines // 2, f"2026-03-14 10:00:17 WARN {name} {extra}")
    return "\n".join(out) + "\n"


@dataclass
class Script:
    """What the user says and what the files hold, the same for every arm."""

    turns: int
    files_per_turn: int
    file_lines: int
    seed: int
    facts: list[Fact] = field(init=False)
    messages: list[str] = field(init=False)
    files: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        self.facts = facts_for(self.turns)
        rng = random.Random(self.seed)
        self.messages, self.files = [], {}
        for turn in range(self.turns):
            # The last task is a long one: its first results are masked while it runs.
            count = self.files_per_turn
            if turn == self.turns - 1:
                count = max(count, LAST_TURN_FILES)
            names = [f"task{turn:02d}_{part}.log" for part in "abcdefgh"[:count]]
            in_files = [f for f in self.facts if f.turn == turn and f.kind in (FINDING, DETAIL)]
            for index, name in enumerate(names):
                extra = in_files[index].sentence if index < len(in_files) else None
                self.files[name] = log_file(rng, name.removesuffix(".log"), self.file_lines, extra)
            said = " ".join(
                f.sentence for f in self.facts if f.turn == turn and f.kind in (NUMBER, DECISION, NAME)
            )
            listed = " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
            self.messages.append(
                (said + " " if said else "")
                + f"Task {turn}: {prose(rng, 60, 110)}. Read {listed} and report what matters."
            )

    def questions(self) -> list[str]:
        n = len(self.facts)
        return [
            f"Question {i + 1} of {n}: what is the {fact.key}? Answer from what you have or can read "
            "with your tools."
            for i, fact in enumerate(self.facts)
        ]


# ---------------------------------------------------------------------------
# Reading a request
# ---------------------------------------------------------------------------
def is_summary_request(body: dict[str, Any]) -> bool:
    """A summary call: the separate one (its own system prompt), or one in the session's layout
    (`compaction.summary_call: "shared"`: its last message asks for the summary)."""
    return body.get("system") == COMPACTION_SUMMARY_SYSTEM_PROMPT or shared_summary_request(body)


def shared_summary_request(body: dict[str, Any]) -> bool:
    last = _blocks(body["messages"][-1]) if body.get("messages") else []
    return any(b.get("type") == "text" and is_shared_summary_text(b.get("text", "")) for b in last)


def summary_request_text(body: dict[str, Any]) -> str:
    """What a summary call asks to summarize, as the separate call's transcript: a shared call's
    messages (but its question) rendered as the separate call renders the history, after the
    summary the epoch starts with."""
    if not shared_summary_request(body):
        return str(body["messages"][0]["content"][0]["text"])
    messages = body["messages"][:-1]
    head = ""
    first = _blocks(messages[0]) if messages else []
    if first and first[0].get("type") == "text" and first[0].get("text", "").startswith(SUMMARY_PREFIX):
        summary = first[0]["text"].split("\n\n", 1)[-1]
        head = f"{COMPACTION_PREVIOUS_SUMMARY_HEADING}\n{summary}\n\n"
        messages = [{"role": "user", "content": first[1:]}, *messages[1:]]
    stored = [StoredMessage(i, m["role"], _blocks(m), 0) for i, m in enumerate(messages)]
    return head + "Conversation:\n" + "\n".join(transcript_lines(stored))


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return content if isinstance(content, list) else [{"type": "text", "text": str(content)}]


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content if isinstance(b, dict))
    return json.dumps(content)


def is_user_words(block: dict[str, Any]) -> bool:
    """A text block the user wrote (not the warning, the summary, the scratchpad block or a hint)."""
    if block.get("type") != "text":
        return False
    words = block.get("text", "")
    return not (
        words == PRE_COMPACTION_WARNING
        or words.startswith((SUMMARY_PREFIX, BLOCK_START, "[Hint:", NOTEPAD_HEADING, NOTEPAD_CHANGED_LEAD))
    )


@dataclass
class Turn:
    """The running turn as the request shows it."""

    words: str  # the user's message that started it
    start: int  # index of the message holding it
    calls: list[dict[str, Any]]  # tool_use blocks the model made in this turn, in order
    results: dict[str, str]  # tool_use id -> result text, as the request shows it now


def running_turn(body: dict[str, Any]) -> Turn:
    messages = body["messages"]
    for index in range(len(messages) - 1, -1, -1):
        if messages[index]["role"] != "user":
            continue
        words = [b["text"] for b in _blocks(messages[index]) if is_user_words(b)]
        if words:
            break
    else:
        raise ValueError("a request without a user message")
    calls: list[dict[str, Any]] = []
    results: dict[str, str] = {}
    for message in messages[index + 1 :]:
        for block in _blocks(message):
            if block.get("type") == "tool_use":
                calls.append(block)
            elif block.get("type") == "tool_result":
                results[block["tool_use_id"]] = _result_text(block.get("content"))
    return Turn(words[-1], index, calls, results)


def offered(body: dict[str, Any]) -> set[str]:
    return {t["name"] for t in body.get("tools") or []}


def labelled_texts(body: dict[str, Any]) -> list[tuple[str, str]]:
    """Every text of the request but the tool definitions, each with where it comes from:
    notepad, scratchpad, summary, archive / observation (a result of this turn's
    session_archive_read / scratchpad_read), or history (everything else)."""
    out: list[tuple[str, str]] = []
    system = body.get("system")
    for block in system if isinstance(system, list) else [{"text": system or ""}]:
        # The block pinned for the epoch holds an agent's learned text, its skills and the
        # notepad, one after the other: each is labelled on its own.
        for words in re.split(r"\n\n(?=## Skills\n|## Session Notepad\n)", block.get("text", "")):
            if words.startswith(LEARNED_HEADING):
                label = "learned"
            elif words.startswith("## Session Notepad"):
                label = "notepad"
            else:
                label = "system"
            out.append((label, words))
    turn = running_turn(body)
    names = {c["id"]: c["name"] for c in turn.calls}
    for index, message in enumerate(body["messages"]):
        for block in _blocks(message):
            kind = block.get("type")
            if kind == "text":
                words = block.get("text", "")
                label = "history"
                if words.startswith(BLOCK_START):
                    label = "scratchpad"
                elif words.startswith((NOTEPAD_HEADING, NOTEPAD_CHANGED_LEAD)):
                    label = "notepad"  # position `message`, or `epoch` once it changed
                elif words.startswith(SUMMARY_PREFIX):
                    label = "summary"
                out.append((label, words))
            elif kind == "tool_use":
                out.append(("history", json.dumps(block.get("input"))))
            elif kind == "tool_result":
                name = names.get(block["tool_use_id"]) if index > turn.start else None
                label = {
                    "session_archive_read": "archive",
                    "recall": "recall",
                    "scratchpad_read": "observation",
                    "agent_state": "state",
                }.get(name or "", "history")
                out.append((label, _result_text(block.get("content"))))
    return out


def masked_data(body: dict[str, Any]) -> list[str]:
    """The observation ids of the masked results of data tools (fs_read) the request shows, in
    order: the placeholders of the reader's own earlier session_archive_read and scratchpad_read
    results are not worth a search."""
    names: dict[str, str] = {}
    ids: list[str] = []
    for message in body["messages"]:
        for block in _blocks(message):
            if block.get("type") == "tool_use":
                names[block["id"]] = block["name"]
            elif block.get("type") == "tool_result" and names.get(block["tool_use_id"]) in DATA_TOOLS:
                ids += PLACEHOLDER_ID.findall(_result_text(block.get("content")))
    return list(dict.fromkeys(ids))


def find(key: str, texts: list[tuple[str, str]]) -> tuple[str, str] | None:
    """(source, value) of the first text stating `key`, memory first, tools' results last."""
    pattern = re.compile(re.escape(key) + " is " + VALUE)
    order = [
        "learned",
        "notepad",
        "scratchpad",
        "summary",
        "history",
        "system",
        "state",
        "archive",
        "recall",
        "observation",
    ]
    for label, words in sorted(texts, key=lambda t: order.index(t[0])):
        if match := pattern.search(words):
            return label, match.group(1).strip()
    return None


def _call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return tool_use(name, arguments).content[0]


def _same_call(block: dict[str, Any], name: str, arguments: dict[str, Any]) -> bool:
    return block.get("name") == name and block.get("input") == arguments


# ---------------------------------------------------------------------------
# The scripted model
# ---------------------------------------------------------------------------
@dataclass
class Answer:
    question: int
    key: str
    value: str | None
    source: str | None
    tool_calls: int


@dataclass
class Agent:
    """Answers the fake's requests. `warning` is what it does with seed 000's pre-compaction
    warning: "save" writes every marked fact it sees and has not yet written down, "ignore"
    answers that the notepad is up to date."""

    warning: str
    summary_requests: int = 4  # the summarizer keeps this many of the latest user requests
    summary_chars: int = 200  # ... and this much of each
    reader_tool_calls: int = 3
    archive_limit: int = 5
    recall_limit: int = 5
    # Tools the reader leaves alone although offered (`--reader-recall off`: what recall adds).
    reader_skips: frozenset[str] = frozenset()
    answers: dict[int, Answer] = field(default_factory=dict)

    def __call__(self, body: dict[str, Any]) -> Reply:
        if is_summary_request(body):
            return text(self.summarize(summary_request_text(body)))
        last = _blocks(body["messages"][-1])
        if any(b.get("type") == "text" and b.get("text") == PRE_COMPACTION_WARNING for b in last):
            return self.on_warning(body)
        turn = running_turn(body)
        if question := QUESTION.match(turn.words):
            return self.read(body, turn, int(question.group(1)), question.group(2))
        return self.work(body, turn)

    # -- the agent at work -----------------------------------------------
    @staticmethod
    def writes(fact_kind: str, key: str, value: str, tools: set[str]) -> list[tuple[str, dict[str, Any]]]:
        """The fixed policy: numbers to the notepad, decisions and findings to the scratchpad
        notes, names to both (notepad, and a scratchpad ref). A switched-off memory is not
        offered, so its writes are simply not made."""
        entry = f"{key} is {value}"
        notepad = ("update_notepad", {"operation": "append", "content": f"- {entry}\n"})
        out: list[tuple[str, dict[str, Any]]] = []
        if fact_kind in (NUMBER, NAME) and "update_notepad" in tools:
            out.append(notepad)
        if fact_kind in (DECISION, FINDING) and "session_scratchpad" in tools:
            label = "decision" if fact_kind == DECISION else "finding"
            out.append(("session_scratchpad", {"action": "append_notes", "content": f"{label}: {entry}"}))
        if fact_kind == NAME and "session_scratchpad" in tools:
            out.append(("session_scratchpad", {"action": "refs.add", "ref": entry}))
        # A session of an agent also keeps what must outlive it (seed 000: "Use agent_state or
        # skills for cross-session knowledge"): numbers in the agent's state, the rest in its
        # learned text. A session without an agent is not offered these tools.
        if fact_kind == NUMBER and "agent_state" in tools:
            out.append(("agent_state", {"action": "set", "key": key, "value": entry}))
        if fact_kind in (NAME, DECISION, FINDING) and "edit_system_prompt" in tools:
            out.append(("edit_system_prompt", {"operation": "append", "content": f"- {entry}\n"}))
        return out

    def work(self, body: dict[str, Any], turn: Turn) -> Reply:
        tools = offered(body)
        planned: list[tuple[str, dict[str, Any]]] = []
        for marker, key, value in MARKED_FACT.findall(turn.words):
            planned += self.writes(KINDS[marker], key, value.strip(), tools)
        findings: list[str] = []
        files = FILES.search(turn.words)
        for path in re.split(r", | and ", files.group(1)) if files else []:
            planned.append(("fs_read", {"path": path}))
            done = next((c for c in turn.calls if _same_call(c, "fs_read", {"path": path})), None)
            if done is None:
                break
            # A finding in the result is written down at once (seed 003: "discover a key fact").
            for marker, key, value in MARKED_FACT.findall(turn.results.get(done["id"], "")):
                if marker == MARKERS[FINDING]:
                    planned += self.writes(FINDING, key, value.strip(), tools)
                    findings.append(f"{key} is {value.strip()}")
        memory = dict.fromkeys(("notepad", "scratchpad", "learned"), "")
        for label, words in labelled_texts(body):
            if label in memory:
                memory[label] += words
        for name, arguments in planned:
            if any(_same_call(c, name, arguments) for c in turn.calls):
                continue
            written = arguments.get("content") or arguments.get("ref") or ""
            entry = written.removeprefix("- ").split(": ", 1)[-1].strip()
            target = {
                "update_notepad": "notepad",
                "session_scratchpad": "scratchpad",
                "edit_system_prompt": "learned",
            }.get(name)
            if target is not None and entry in memory[target]:
                continue  # already written down (e.g. at a pre-compaction warning)
            return tool_use(name, arguments)
        task = TASK.search(turn.words)
        number = int(task.group(1)) if task else 0
        report = f"Report for task {number}: {prose(random.Random(number), 80, 140)}."
        return text(report + "".join(f" Finding: the {f}." for f in findings))

    def on_warning(self, body: dict[str, Any]) -> Reply:
        """With "save": every marked fact the request shows and the memory does not hold is
        written down now, where the policy puts it; a fact whose place is switched off goes to
        the notepad (the warning asks for it), else to the scratchpad notes."""
        if self.warning != "save":
            return text("Notepad is up to date.")
        texts = labelled_texts(body)
        memory = "\n".join(w for label, w in texts if label in ("notepad", "scratchpad"))
        seen = "\n".join(w for label, w in texts if label not in ("notepad", "scratchpad", "system"))
        tools = offered(body)
        notepad: list[str] = []
        notes: list[str] = []
        refs: list[str] = []
        for marker, key, value in MARKED_FACT.findall(seen):
            entry = f"{key} is {value.strip()}"
            if entry in memory or entry in notepad + notes + refs:
                continue
            # The session's own memory (what the agent keeps across sessions it wrote at once).
            writes = [
                w for w in self.writes(KINDS[marker], key, value.strip(), tools) if w[0] in MEMORY_TOOLS
            ]
            if not writes and "update_notepad" in tools:
                writes = [("update_notepad", {"operation": "append", "content": f"- {entry}\n"})]
            elif not writes and "session_scratchpad" in tools:
                writes = [("session_scratchpad", {"action": "append_notes", "content": entry})]
            for name, arguments in writes:
                if name == "update_notepad":
                    notepad.append(arguments["content"])
                elif arguments["action"] == "append_notes":
                    notes.append(arguments["content"])
                else:
                    refs.append(arguments["ref"])
        calls: list[dict[str, Any]] = []
        if notepad:
            calls.append(_call("update_notepad", {"operation": "append", "content": "".join(notepad)}))
        if notes:
            calls.append(_call("session_scratchpad", {"action": "append_notes", "content": "\n".join(notes)}))
        calls += [_call("session_scratchpad", {"action": "refs.add", "ref": ref}) for ref in refs]
        if not calls:
            return text("Notepad is up to date." if tools & MEMORY_TOOLS else "I have no memory to write to.")
        return Reply(calls, stop_reason="tool_use")

    # -- the reader -------------------------------------------------------
    def read(self, body: dict[str, Any], turn: Turn, number: int, key: str) -> Reply:
        """Answer from the request if it states the fact; else fetch with the session's tools,
        at most `reader_tool_calls` calls: read_notepad (if the notepad is offered but not in the
        prompt), session_archive_read with the key as query, recall with the key, then
        scratchpad_read grep on the
        masked fs_read results whose placeholders the request shows, newest first."""
        found = find(key, labelled_texts(body))
        if found is not None:
            source, value = found
            self.answers[number] = Answer(number, key, value, source, len(turn.calls))
            return text(f"The {key} is {value}.")
        tools = offered(body) - self.reader_skips
        candidates: list[tuple[str, dict[str, Any]]] = []
        texts = labelled_texts(body)
        if "agent_state" in tools:  # a session of an agent: its lasting state first
            candidates.append(("agent_state", {"action": "get", "key": key}))
        if "read_notepad" in tools and not any(label == "notepad" for label, _ in texts):
            candidates.append(("read_notepad", {}))
        if "session_archive_read" in tools:
            candidates.append(("session_archive_read", {"query": key, "limit": self.archive_limit}))
        if "recall" in tools:  # every archive (and, with an agent, its other sessions)
            candidates.append(("recall", {"query": key, "limit": self.recall_limit}))
        if "scratchpad_read" in tools:
            for observation in reversed(masked_data(body)):
                grep = {"scratchpad_id": observation, "mode": "grep", "pattern": re.escape(key)}
                candidates.append(("scratchpad_read", grep))
        if len(turn.calls) < self.reader_tool_calls:
            for name, arguments in candidates:
                if not any(_same_call(c, name, arguments) for c in turn.calls):
                    return tool_use(name, arguments)
        self.answers[number] = Answer(number, key, None, None, len(turn.calls))
        return text(f"I could not find the {key}.")

    # -- the summarizer ----------------------------------------------------
    def summarize(self, request: str) -> str:
        """A lossy summary, as a model asked for a bounded one writes: the latest user requests
        (their first `summary_chars` characters) and the start of the last assistant reply;
        older requests, tool results and the rest are dropped. Merges with the previous summary."""
        requests: list[str] = []
        reply = ""
        if COMPACTION_COMBINE_INSTRUCTION in request:
            for part in re.split(r"(?:^|\n\n)Summary of part \d+:\n", request)[1:]:
                found, last = self._parse(part)
                requests += found
                reply = last or reply
            return self._render(requests, reply)
        if request.startswith(COMPACTION_PREVIOUS_SUMMARY_HEADING):
            previous, _, request = request[len(COMPACTION_PREVIOUS_SUMMARY_HEADING) :].partition(
                "\n\nConversation"
            )
            requests, reply = self._parse(previous)
        for line in request.splitlines():
            if line.startswith("[user] ") and not line[7:].startswith(PRE_COMPACTION_WARNING[:20]):
                requests.append(self._short(line[7:]))
            elif line.startswith("[assistant] "):
                reply = self._short(line[12:])
        return self._render(requests, reply)

    def _short(self, words: str) -> str:
        words = " ".join(words.split())
        return words if len(words) <= self.summary_chars else words[: self.summary_chars] + "…"

    def _render(self, requests: list[str], reply: str) -> str:
        kept = requests[-self.summary_requests :]
        lines = [f"Latest user requests ({len(requests) - len(kept)} earlier left out):"]
        lines += [f"- {r}" for r in kept]
        return "\n".join(lines + ([f"Last assistant reply: {reply}"] if reply else []))

    @staticmethod
    def _parse(summary: str) -> tuple[list[str], str]:
        requests = [line[2:] for line in summary.splitlines() if line.startswith("- ")]
        prefix = "Last assistant reply: "
        reply = next((line[len(prefix) :] for line in summary.splitlines() if line.startswith(prefix)), "")
        return requests, reply.strip()


def facts_table(script: Any, results: list[Any]) -> None:
    """Print, per fact, where each arm's reader found it (`**lost**`: not reached)."""
    header = " | ".join(f"{r.arm}, {r.warning}" for r in results)
    print(f"| fact (kind, work turn) | {header} |")
    print("|---|" + "---|" * len(results))
    for index, fact in enumerate(script.facts, start=1):
        cells = []
        for r in results:
            answer = r.answers.get(index)
            cells.append(answer.source if answer is not None and answer.value is not None else "**lost**")
        print(f"| {fact.key} ({fact.kind}, {fact.turn}) | " + " | ".join(cells) + " |")
