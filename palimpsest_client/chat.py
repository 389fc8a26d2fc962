"""A terminal chat with a Palimpsest session, on `palimpsest_client`.

    python -m palimpsest_client chat [--url URL] [--token TOKEN] [--session ID]
    palimpsest-chat ...                       (the same, installed as a console script)

The answer streams as the model writes it; tool calls, memory updates, compactions and
sub-sessions show as one-line notices. Commands: /notepad, /scratchpad, /attach ID, /cancel,
/end, /export FILE, /import FILE, /budget, /approve, /deny, /help, /quit. In a terminal you may
type while a turn runs (/cancel stops it); with input from a pipe each message waits for its turn
to end before the next line is read, unless a tool call waits for approval: then the next line
answers it (y or n).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from typing import Any, TextIO, TypeVar

from palimpsest_client.client import DEFAULT_URL, Client, Session, connect
from palimpsest_client.errors import AgentNotFound, AuthenticationError, PalimpsestError, ProtocolError
from palimpsest_client.events import (
    ApprovalRequested,
    AssistantDelta,
    AssistantMessage,
    CompactionCompleted,
    CompactionFailed,
    CompactionMasked,
    CompactionWarning,
    ErrorEvent,
    Event,
    NotepadUpdated,
    ScratchpadUpdated,
    SessionSpawned,
    SessionStatus,
    TaskEnded,
    TaskStarted,
    ToolCall,
    ToolResult,
    TurnCompleted,
    UserMessage,
)

T = TypeVar("T")
TOKEN_ENV = "PALIMPSEST_TOKEN"
URL_ENV = "PALIMPSEST_URL"
PROMPT = "you> "
MODEL_PREFIX = "model> "
# A notice is one line: longer values are cut to this many characters.
NOTICE_PREVIEW_CHARS = 100
# Messages of the conversation shown after /attach.
ATTACH_SHOWN_MESSAGES = 10
# Where `make chat` keeps the token it made (the Makefile's CHAT_TOKEN), and what to do when
# the server refuses it.
MAKE_CHAT_TOKEN_FILE = ".local/chat-token"
NEW_TOKEN_HOWTO = (
    f"With `make chat`, delete {MAKE_CHAT_TOKEN_FILE} (or set {TOKEN_ENV} to a valid token) and run\n"
    "`make chat` again: it makes a new token. Otherwise create one with\n"
    "  PALIMPSEST_DEV=1 .venv/bin/python manage.py create_agent_token NAME\n"
)
TOKEN_REFUSED = (
    "The server refused the token (close code 4401): it is wrong, was revoked, or belongs to\n"
    "another database.\n" + NEW_TOKEN_HOWTO
)
TOKEN_REVOKED = (
    "The server closed the connection: the token was revoked (close code 4401).\n" + NEW_TOKEN_HOWTO
)
# The answers to a call waiting for approval that are not commands (`n reason` denies with one).
YES = frozenset({"y", "yes"})
YES_NO = YES | {"n", "no"}
# `/budget WHICH N`: the setting each word sets (PROTOCOL.md v1.2 `settings.budget`).
BUDGET_LIMITS = {"cost": "max_cost_usd", "input": "max_input_tokens", "output": "max_output_tokens"}
# A line ending with it goes on on the next line: one message of several lines.
CONTINUE_MARK = "\\"
HELP = """Commands:
  /notepad        the session's notepad
  /scratchpad     its scratchpad (notes, plan, refs)
  /attach ID      switch to another session of this token
  /cancel         stop the running turn
  /end            end the session (it takes no more messages; what it holds is kept)
  /export FILE    write the session's export document (everything it holds) to FILE
  /import FILE    import an exported session as a new session of this token, and attach to it
  /budget         the session's budget and what its tree has spent;
                  /budget cost|input|output N sets a limit, /budget off clears them
  /approve [ID]   let a tool call waiting for approval run (or type y)
  /deny [REASON]  refuse it: the model reads a tool error (or type n)
  /help           this list
  /quit           leave (a running turn goes on on the server)
Anything else is sent to the model (the scripted model answers `help` with what it understands).
End a line with \\ to go on with the message on the next line (code, a list)."""


def _one_line(value: Any, limit: int = NOTICE_PREVIEW_CHARS) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _masked_notice(event: CompactionMasked) -> str:
    count = len(event.masked)
    results = "tool result" if count == 1 else "tool results"
    text = f"masked {count} old {results}: {event.tokens_before} → {event.tokens_after} tokens"
    kept = [str(m.get("observation_id")) for m in event.masked if m.get("observation_id")]
    if kept:
        text += f" (kept whole as {'observation' if len(kept) == 1 else 'observations'} {', '.join(kept)})"
    return _one_line(text, 2 * NOTICE_PREVIEW_CHARS)


def _budget_text(state: Mapping[str, Any]) -> str:
    """The session's budget limits, and its spend where the state says it."""
    limits = (state.get("settings") or {}).get("budget") or {}
    shown = [f"{word} {limits[key]}" for word, key in BUDGET_LIMITS.items() if limits.get(key) is not None]
    text = "Budget: " + (", ".join(shown) if shown else "none")
    spent = state.get("spend")
    if isinstance(spent, dict):
        cost = spent.get("cost_usd")
        text += (
            f". Spent: {'no price known' if cost is None else f'${cost:.4f}'}, "
            f"{spent.get('input_tokens', 0):,} input and {spent.get('output_tokens', 0):,} output tokens"
        )
    return text + "."


class Chat:
    """The chat's core: reads lines, sends messages and commands, writes what happens to `out`."""

    def __init__(self, client: Client, out: TextIO, *, interactive: bool, agent: str | None = None) -> None:
        self.client = client
        # `--agent NAME`: the new session is one of this client's agent NAME (made when missing).
        self.agent = agent
        self.out = out
        self.interactive = interactive
        self.session: Session | None = None
        self.turn: asyncio.Task[None] | None = None
        # Tool calls waiting for approval (`tool.approval_requested`), oldest first.
        self.approvals: dict[str, ApprovalRequested] = {}
        self._approval_wanted = asyncio.Event()
        self._line_open = False  # the last write left a line unfinished (streamed text)
        self._prompted = False  # the prompt is the last thing written

    # -- output --------------------------------------------------------------------------
    def write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()
        self._prompted = False

    def line(self, text: str) -> None:
        """A whole line, on a line of its own."""
        if self._line_open:
            self.write("\n")
            self._line_open = False
        self.write(text + "\n")

    def notice(self, event: Event, text: str) -> None:
        where = ""
        if self.session is not None and event.session_id != self.session.id:
            where = f"[sub {event.session_id[:8]}] "
        self.line(f"  · {where}{text}")

    def prompt(self) -> None:
        if self.interactive and not self._prompted:
            self.write(PROMPT)
            self._prompted = True

    # -- events --------------------------------------------------------------------------
    def show(self, event: Event) -> None:
        root = self.session is not None and event.session_id == self.session.id
        if isinstance(event, AssistantDelta):
            if root:
                if not self._line_open:
                    self.write(MODEL_PREFIX)
                self.write(event.text)
                self._line_open = True
        elif isinstance(event, AssistantMessage):
            if not root:
                if event.text:
                    self.notice(event, f"said: {_one_line(event.text)}")
            elif self._line_open:
                self.write("\n")
                self._line_open = False
        elif isinstance(event, ToolCall):
            who = "answered by the client" if event.executor == "client" else "run by the server"
            self.notice(event, f"tool {event.name} {_one_line(event.input)} ({who})")
        elif isinstance(event, ApprovalRequested):
            self.approvals[event.tool_use_id] = event
            self._approval_wanted.set()
            self.notice(
                event,
                f"tool {event.name} {_one_line(event.input)} waits for your approval: "
                "y to run it, n [reason] to refuse (/approve, /deny)",
            )
        elif isinstance(event, ToolResult):
            self._approval_settled(event.tool_use_id)
            verb = "failed" if event.is_error else "→"
            self.notice(event, f"{event.name} {verb} {_one_line(event.content)}")
        elif isinstance(event, NotepadUpdated):
            said = f": {_one_line(event.note)}" if event.note else ""
            self.notice(event, f"notepad updated (version {event.version}, by {event.author}){said}")
        elif isinstance(event, ScratchpadUpdated):
            self.notice(event, f"scratchpad {event.space} updated (by {event.author})")
        elif isinstance(event, CompactionWarning):
            tokens = f"{event.estimated_tokens} of {event.threshold_tokens} tokens"
            self.notice(event, f"context at {tokens}: compacting soon")
        elif isinstance(event, CompactionCompleted):
            self.notice(
                event, f"compacted: {event.tokens_before} → {event.tokens_after} tokens (epoch {event.epoch})"
            )
        elif isinstance(event, CompactionMasked):
            self.notice(event, _masked_notice(event))
        elif isinstance(event, CompactionFailed):
            self.notice(event, f"compaction failed: {_one_line(event.message)}")
        elif isinstance(event, SessionSpawned):
            child = event.child_session_id[:8]
            self.notice(event, f"sub-session {child} started ({event.mode}): {_one_line(event.title)}")
        elif isinstance(event, SessionStatus) and event.status == "compacting":
            self.notice(event, "compacting the history…")
        elif isinstance(event, TaskStarted):
            self.notice(event, f"task started: {event.name}")
        elif isinstance(event, TaskEnded):
            self.notice(event, f"task ended: {event.name}")
        elif event.type == "agent.updated":  # PROTOCOL.md v1.2: the agent's knowledge changed
            raw = event.raw
            what = f"{raw.get('part')} {raw.get('name') or ''}".strip()
            version = f" (version {raw['version']})" if raw.get("version") is not None else ""
            self.notice(event, f"agent {raw.get('agent')}: {what} updated{version}")
        elif event.type == "session.ended":
            self.notice(event, f"session ended ({event.raw.get('reason')})")
        elif isinstance(event, ErrorEvent):
            self.notice(event, f"error {event.code}: {event.message}")
        elif isinstance(event, TurnCompleted) and (not root or event.stop_reason != "end_turn"):
            self.notice(event, f"turn ended: {event.stop_reason}")
        if isinstance(event, TurnCompleted):
            for tool_use_id, asked in list(self.approvals.items()):
                if asked.session_id == event.session_id:
                    self._approval_settled(tool_use_id)

    def _approval_settled(self, tool_use_id: str) -> None:
        self.approvals.pop(tool_use_id, None)
        if not self.approvals:
            self._approval_wanted.clear()

    # -- the loop ------------------------------------------------------------------------
    async def start(self, session_id: str | None) -> None:
        if session_id:
            await self.attach(session_id)
        elif self.agent:
            try:
                await self.client.get_agent(self.agent)
            except AgentNotFound:
                await self.client.create_agent(self.agent)
                self.line(f"Created the agent {self.agent}.")
            self.session = await self.client.create_session(title="terminal chat", agent=self.agent)
            model = self.session.info.get("model")
            self.line(f"New session {self.session.id} of the agent {self.agent} (model {model}).")
        else:
            self.session = await self.client.create_session(title="terminal chat")
            self.line(f"New session {self.session.id} (model {self.session.info.get('model')}).")
        self.line("Type a message, or /help.")

    async def run(self, lines: AsyncIterator[str]) -> None:
        """Read `lines` until they end or /quit. Should the client end meanwhile (the token
        revoked, the connection lost for good), its `failure` is raised at once, even while
        the chat waits for a line."""
        ended = asyncio.ensure_future(self.client.wait_ended())
        try:
            self.prompt()
            pending: list[str] = []  # the lines of a message continued with a final backslash
            while (raw := await self._unless_ended(anext(lines, None), ended)) is not None:
                line = raw.rstrip("\r\n")
                self._prompted = False  # the user's line ended it
                if line.endswith(CONTINUE_MARK):
                    pending.append(line[: -len(CONTINUE_MARK)])
                    continue
                text = "\n".join([*pending, line]).strip()
                pending = []
                if text == "/quit":
                    break
                if text:
                    await self.handle(text)
                if self.turn is not None and not self.interactive:
                    # Piped input: one turn at a time, but a call waiting for approval is
                    # answered by the next line.
                    await self._unless_ended(self._turn_or_approval(), ended)
                if self.turn is None:
                    self.prompt()
            if self.turn is not None and not self.interactive:
                await self._unless_ended(self.turn, ended)
        finally:
            ended.cancel()
            if self._line_open or self._prompted:
                self.write("\n")
                self._line_open = False

    async def _turn_or_approval(self) -> None:
        """Until the running turn ends or a tool call of it waits for approval."""
        if self.turn is None or self.approvals:
            return
        wanted = asyncio.ensure_future(self._approval_wanted.wait())
        try:
            await asyncio.wait({self.turn, wanted}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            wanted.cancel()

    async def _unless_ended(self, awaitable: Awaitable[T], ended: asyncio.Future[PalimpsestError]) -> T:
        """`awaitable`'s result, unless the client ends first: then (`awaitable` cancelled) why."""
        waiting = asyncio.ensure_future(awaitable)
        both: set[asyncio.Future[Any]] = {waiting, ended}
        await asyncio.wait(both, return_when=asyncio.FIRST_COMPLETED)
        if waiting.done():
            return waiting.result()
        waiting.cancel()
        with contextlib.suppress(BaseException):
            await waiting
        raise ended.result()

    async def handle(self, text: str) -> None:
        session = self.session
        assert session is not None
        command, _, argument = text.partition(" ")
        try:
            if command == "/help":
                self.line(HELP)
            elif command == "/notepad":
                notepad = session.notepad()
                self.line(notepad.rstrip("\n") if notepad else "(the notepad is empty)")
            elif command == "/scratchpad":
                self.show_scratchpad(session)
            elif command == "/cancel":
                if self.turn is None:
                    self.line("No turn is running.")
                else:
                    await session.cancel()
            elif command == "/end":
                await session.end()
                self.line(f"Session {session.id} ended: it takes no more messages.")
            elif command == "/export":
                await self.export(session, argument.strip())
            elif command == "/import":
                await self.import_session(argument.strip())
            elif command == "/budget":
                await self.budget(session, argument.split())
            elif command in ("/approve", "/deny") or (self.approvals and command.lower() in YES_NO):
                await self.answer_approval(command, argument.strip(), text)
            elif command == "/attach":
                if not argument.strip():
                    self.line("Usage: /attach SESSION_ID")
                elif self.turn is not None:
                    self.line("A turn is running: wait for it, or /cancel it first.")
                else:
                    await self.attach(argument.strip())
            elif text.startswith("/"):
                self.line(f"Unknown command {command}; /help lists them.")
            elif self.turn is not None:
                self.line("A turn is running: wait for it, or /cancel it.")
            else:
                self.turn = asyncio.create_task(self.run_turn(session, text))
        except PalimpsestError as exc:
            if exc is self.client.failure:
                raise  # the client's end: `run` tells it, once
            self.error(exc)

    async def export(self, session: Session, target: str) -> None:
        if not target:
            self.line("Usage: /export FILE")
            return
        size = await self.client.export_session(session.id, target)
        self.line(f"Exported session {session.id} to {target} ({size:,} bytes).")

    async def import_session(self, source: str) -> None:
        if not source:
            self.line("Usage: /import FILE")
        elif self.turn is not None:
            self.line("A turn is running: wait for it, or /cancel it first.")
        else:
            try:
                state = await self.client.import_session(source)
            except OSError as exc:
                self.line(f"! cannot read {source}: {exc.strerror or exc}")
                return
            self.line(f"Imported {source} as session {state['id']}.")
            await self.attach(state["id"])

    async def budget(self, session: Session, words: list[str]) -> None:
        """`/budget`: the limits and the spend; `/budget cost|input|output N`, `/budget off`."""
        if words == ["off"]:
            limits: dict[str, Any] = dict.fromkeys(BUDGET_LIMITS.values())
        elif len(words) == 2 and words[0] in BUDGET_LIMITS:
            try:
                value = float(words[1]) if words[0] == "cost" else int(words[1])
            except ValueError:
                self.line(f"Usage: /budget {words[0]} N (a number)")
                return
            limits = {BUDGET_LIMITS[words[0]]: value}
        elif words:
            self.line("Usage: /budget, /budget cost|input|output N, /budget off")
            return
        else:
            limits = {}
        state = await session.update(settings={"budget": limits}) if limits else await session.state()
        self.line(_budget_text(state))

    async def answer_approval(self, command: str, argument: str, text: str) -> None:
        if not self.approvals:
            self.line("No tool call waits for approval.")
            return
        allow = command == "/approve" or command.lower() in YES
        reason = argument if command == "/deny" else text.partition(" ")[2].strip()
        asked = next(iter(self.approvals.values()))
        if command == "/approve" and argument:
            if argument not in self.approvals:
                self.line(f"No call {argument} waits for approval; waiting: {', '.join(self.approvals)}.")
                return
            asked = self.approvals[argument]
        if allow:
            await self.client.approve(asked.session_id, asked.tool_use_id)
            self.line(f"Approved {asked.name} ({asked.tool_use_id}).")
        else:
            await self.client.deny(asked.session_id, asked.tool_use_id, reason or None)
            self.line(f"Denied {asked.name} ({asked.tool_use_id}).")
        self._approval_settled(asked.tool_use_id)

    def error(self, exc: PalimpsestError) -> None:
        """A request that failed (the chat goes on)."""
        self.line(f"! {exc.code}: {exc.message}" if isinstance(exc, ProtocolError) else f"! {exc}")

    async def run_turn(self, session: Session, text: str) -> None:
        try:
            async for event in session.send(text):
                self.show(event)
        except PalimpsestError as exc:
            if exc is not self.client.failure:  # the client's end: `run` tells it, once
                self.error(exc)
        finally:
            self.turn = None
            if self.interactive and self.client.failure is None:
                self.prompt()

    async def attach(self, session_id: str) -> None:
        try:
            session = await self.client.attach(session_id)
        except PalimpsestError:
            # Refused, the client stays on the chat's session; but if the server attached it and a
            # later step failed (reading the session's state), the chat follows the client.
            switched = self.client.session
            if switched is not None and switched is not self.session:
                self.session = switched
                self.line(f"Attached to {switched.id}, but its state could not be read:")
            raise
        self.session = session
        title = session.info.get("title") or "untitled"
        self.line(
            f"Attached to {session.id} ({title}, {session.info.get('status')}, "
            f"{len(session.replayed)} events)."
        )
        said = [e for e in session.replayed if isinstance(e, UserMessage | AssistantMessage)]
        said = [e for e in said if e.session_id == session.id][-ATTACH_SHOWN_MESSAGES:]
        for event in said:
            if isinstance(event, UserMessage):
                self.line(f"{PROMPT}{_one_line(event.content, 400)}")
            elif isinstance(event, AssistantMessage) and event.text:
                self.line(f"{MODEL_PREFIX}{_one_line(event.text, 400)}")

    def show_scratchpad(self, session: Session) -> None:
        spaces = session.scratchpad()
        if not any(spaces.values()):
            self.line("(the scratchpad is empty)")
            return
        for space in ("notes", "plan", "refs"):
            value = spaces.get(space)
            if not value:
                continue
            self.line(f"## {space}")
            self.line(
                "\n".join(f"- {v}" for v in value) if isinstance(value, list) else str(value).rstrip("\n")
            )


async def stdin_lines() -> AsyncIterator[str]:
    """Lines of standard input, read by a daemon thread (a blocked read never holds up exit)."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[str | None] = asyncio.Queue()

    def read() -> None:
        for line in sys.stdin:
            loop.call_soon_threadsafe(queue.put_nowait, line)
        loop.call_soon_threadsafe(queue.put_nowait, None)

    threading.Thread(target=read, name="palimpsest-chat-stdin", daemon=True).start()
    while (line := await queue.get()) is not None:
        yield line


async def chat(
    url: str, token: str, session_id: str | None, out: TextIO, *, interactive: bool, agent: str | None = None
) -> int:
    """Run the chat on standard input; the exit status."""
    started = False
    try:
        async with connect(url, token) as client:
            talk = Chat(client, out, interactive=interactive, agent=agent)
            await talk.start(session_id)
            started = True
            await talk.run(stdin_lines())
    except AuthenticationError:
        out.write(TOKEN_REVOKED if started else TOKEN_REFUSED)
        return 2
    except OSError as exc:
        out.write(f"Cannot connect to {url} ({exc}). Is the server running (make run)?\n")
        return 1
    except PalimpsestError as exc:
        out.write(f"{exc}\n")
        return 1
    return 0


def parser() -> argparse.ArgumentParser:
    parse = argparse.ArgumentParser(
        prog="palimpsest-chat", description="Chat with a Palimpsest session from the terminal."
    )
    parse.add_argument(
        "--url",
        default=os.environ.get(URL_ENV, DEFAULT_URL),
        help=f"agent websocket (${URL_ENV}; {DEFAULT_URL})",
    )
    parse.add_argument("--token", default=os.environ.get(TOKEN_ENV, ""), help=f"agent token (${TOKEN_ENV})")
    parse.add_argument("--session", default=None, help="attach to this session instead of creating one")
    parse.add_argument(
        "--agent", default=None, help="start a session of this agent of the client (created when missing)"
    )
    return parse


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if not args.token:
        sys.stderr.write(
            f"A token is needed: --token TOKEN or ${TOKEN_ENV}. Create one with\n"
            "  PALIMPSEST_DEV=1 .venv/bin/python manage.py create_agent_token NAME\n"
        )
        return 2
    try:
        return asyncio.run(
            chat(
                args.url,
                args.token,
                args.session,
                sys.stdout,
                interactive=sys.stdin.isatty(),
                agent=args.agent,
            )
        )
    except KeyboardInterrupt:
        return 130
