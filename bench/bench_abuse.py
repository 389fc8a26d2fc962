"""Issue 31's attacks, bounded in count and time, on loopback: a runaway model and a hostile
client against real daphne processes, with another client's one-step turns alongside.

    .venv/bin/python bench/bench_abuse.py all                   # every attack, one daphne, SQLite
    .venv/bin/python bench/bench_abuse.py fanout --fanout 60 --fanout-children 60
    .venv/bin/python bench/bench_abuse.py all --processes 2 \\
        --database-url postgres://postgres@127.0.0.1:5432/palimpsest_abuse --redis-url redis://127.0.0.1:6379/6

The model is the fake Messages API (`tests/fake_anthropic.py`) in a process of its own
(`bench/_abuse_fake.py`), reached through the real `anthropic` SDK; the client drives it with
directives in its messages (`@@spawn 60 TASK`: a step of 60 `spawn_session` calls, ...), so each
attack is deterministic. Each attack gets fresh daphne processes (the server's quotas and limits
at their production defaults; the code sandbox `auto`) and tokens of its own; the database and the
fake live for the whole run.

1. `fanout`: a root whose first step makes `--fanout` spawn_session calls, each child's first
   step `--fanout-children` more (settings `subsessions.max_concurrent` 32): sessions created by
   the one user message (rows), model calls, refused spawns, server RSS.
2. `fork`: a session of `--fork-messages` messages of `--fork-message-mb` MB (window 10,000,000),
   whose step makes `--forks` fork_session calls (refused since issue 31: over the fork limit);
   then the same with `--fork-fit-messages` of `--fork-fit-kb` KB, under the default limit: RSS
   kept per fork after the turn and after `--fork-pause` seconds, database bytes added per fork.
3. `sandbox`: `--sandbox-runs` steps, each a sandbox run writing `session.notepad.write("x" *
   99_000)` in a loop: database bytes per run, notepad revision rows, `notepad.updated` bytes the
   client received.
4. `revocation`: a root with `--revoke-children` children taking a model step every
   `--revoke-step-seconds`; the token is revoked (`sessions_app.tokens.agent_tokens_revoke`, what
   the admin and `revoke_agent_token` use): model calls the fake receives after it, within
   `--revoke-watch` seconds.
5. `flood`: `session.get` at `--flood-rate` frames/s for `--flood-seconds`; `bigframes`: 200 KB
   frames (`session.get` with a padding field) at `--big-rate` for `--big-seconds`: answers/s,
   `rate_limited` errors, a close by the server, time from the last frame sent to its answer
   (waited for at most `--flood-drain` seconds), RSS kept per 100 hostile frames.
6. `reattach`: a root with `--descendants` descendants (one real, the rest copies of its rows
   made in the database), attached with empty `since_seqs`: frames and bytes replayed, the size
   of `session.attached`.

During 1, 2, 3 and 5 (both) another client (its own token, on the same daphne as the attacker) runs
one-step turns one after the other: its stall is the time from its `user.message` to its
`turn.completed` (worst and p99). Refusals (a spawn's tool error, `rate_limited`, a closed socket)
are counted, not fatal. `--json` prints the figures as JSON instead of the tables.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.servers import Daphne, server_env  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from _setup import bench_folder  # noqa: E402
from bench_server import django_configure, percentile, rss_kib  # noqa: E402

MODEL = "claude-sonnet-4-5"
MIB = 1024 * 1024
# Settings the runs used for the fan-out; the most `max_concurrent` may be.
FANOUT_SETTINGS = {"subsessions": {"max_concurrent": 32}}
# A pause before reading RSS once a phase's work is done, then readings until two agree.
SETTLE_SECONDS = 2.0
# What the other client's turn, and an attack's turn, may take before it counts as hung.
BYSTANDER_TURN_SECONDS = 60.0
CANCEL_WAIT_SECONDS = 30.0
# The words of the fork attack's history.
_WORDS_TEXT = (
    "the of and to in is you that it he was for on are as with his they at be this have from or one had by "
    "word but not what all were we when your can said there use an each which she do how their if will up "
    "other about out many then them these so some her would make like him into time has look two more write "
    "go see number no way could people my than first water been call who oil its now find long down day did "
    "get come made may part"
)
WORDS = _WORDS_TEXT.split()
SANDBOX_CODE = """\
n = 0
try:
    for i in range({writes}):
        session.notepad.write(str(i) + " " + "x" * 99_000)
        n += 1
except Exception as exc:
    print("stopped:", type(exc).__name__, str(exc)[:200])
print("writes", n)
"""


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- the fake model and the servers ---------------------------------------------------------


class AbuseFake:
    """`bench/_abuse_fake.py` in its own process."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(ROOT / "bench" / "_abuse_fake.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        self.url = self.process.stdout.readline().strip()

    def calls(self, since: float = 0.0) -> int:
        """Model calls that arrived at or after `since` (time.monotonic())."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"calls {since!r}\n")
        self.process.stdin.flush()
        return int(json.loads(self.process.stdout.readline())["since"])

    def stop(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


class Stack:
    """Fresh daphne processes for one attack (stopped, with whatever still runs in them, after)."""

    def __init__(self, env: dict[str, str], processes: int, folder: Path, fake: AbuseFake, name: str) -> None:
        self.env, self.processes, self.folder, self.fake, self.name = env, processes, folder, fake, name
        self.servers: list[Daphne] = []

    async def __aenter__(self) -> Stack:
        base = server_env(**self.env, ANTHROPIC_BASE_URL=self.fake.url)
        base["PALIMPSEST_POLL_SECONDS"] = "1.0"  # the production default
        for index in range(self.processes):
            server = Daphne(base, self.folder / f"{self.name}-daphne{index}.log")
            self.servers.append(server)
            await asyncio.to_thread(server.start)
        return self

    async def __aexit__(self, *exc: object) -> None:
        for server in self.servers:
            await asyncio.to_thread(server.stop)

    @property
    def url(self) -> str:
        return self.servers[0].ws_url

    def rss(self) -> int:
        """KiB, all the daphne processes together."""
        return sum(rss_kib(s.process.pid) for s in self.servers if s.process is not None)

    async def settled_rss(self) -> int:
        """RSS once the server has finished what it was doing (two readings 0.2 s apart within
        256 KiB, at most 10 s)."""
        await asyncio.sleep(SETTLE_SECONDS)
        previous = -1
        current = self.rss()
        for _ in range(50):
            current = self.rss()
            if abs(current - previous) < 256:
                break
            previous = current
            await asyncio.sleep(0.2)
        return current


class RssPeak:
    """The highest RSS seen while it runs (sampled every 0.2 s)."""

    def __init__(self, stack: Stack) -> None:
        self.stack, self.peak = stack, 0
        self.task: asyncio.Task[None] | None = None

    async def _sample(self) -> None:
        while True:
            self.peak = max(self.peak, self.stack.rss())
            await asyncio.sleep(0.2)

    async def __aenter__(self) -> RssPeak:
        self.task = asyncio.create_task(self._sample())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.task is not None
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        self.peak = max(self.peak, self.stack.rss())


# -- the database, read by this process -----------------------------------------------------


def _token_create(name: str) -> tuple[Any, str]:
    from sessions_app import services

    return services.agent_token_create(name=name)


async def token_create(name: str) -> tuple[Any, str]:
    """A new token: its row and the raw token."""
    return await asyncio.to_thread(_token_create, name)


def _db_bytes() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            # Pages in use, those still in the WAL included (the snapshot's size).
            values = []
            for pragma in ("page_count", "freelist_count", "page_size"):
                cursor.execute(f"PRAGMA {pragma}")
                values.append(cursor.fetchone()[0])
            return (values[0] - values[1]) * values[2]
        cursor.execute("SELECT pg_database_size(current_database())")
        return int(cursor.fetchone()[0])


async def db_bytes() -> int:
    return await asyncio.to_thread(_db_bytes)


def _tree(root_id: str, model_calls_since: Any = None) -> dict[str, int]:
    from django.db.models import Q

    from sessions_app.models import AgentSession, ModelCall

    sessions = AgentSession.objects.filter(Q(pk=root_id) | Q(root_session_id=root_id))
    calls = ModelCall.objects.filter(Q(session_id=root_id) | Q(session__root_session_id=root_id))
    counts = {
        "sessions": sessions.count(),
        "running": sessions.filter(status="running").count(),
        "model_calls": calls.count(),
    }
    if model_calls_since is not None:
        counts["model_calls_since"] = calls.filter(started_at__gte=model_calls_since).count()
    return counts


async def tree(root_id: str, model_calls_since: Any = None) -> dict[str, int]:
    """The sessions of a root's tree (rows), how many of them run a turn, their model calls."""
    return await asyncio.to_thread(_tree, root_id, model_calls_since)


# -- clients --------------------------------------------------------------------------------


class Closed(Exception):
    """The server closed the connection."""


class Refused(Exception):
    """The server answered a frame with an error."""

    def __init__(self, frame: dict[str, Any]) -> None:
        super().__init__(f"{frame.get('code')}: {frame.get('message')}")
        self.frame = frame


Predicate = Callable[[dict[str, Any]], bool]


class Conn:
    """One agent websocket, read all the time by a task of its own: counts every frame and byte,
    wakes whoever waits for a frame, and calls the hooks."""

    def __init__(self, url: str, token: str) -> None:
        self.url, self.token = url, token
        self.ws: Any = None
        self.session_id = ""
        self.state: dict[str, Any] = {}
        self.frames = 0
        self.bytes = 0
        self.types: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.close_code: int | None = None
        self.closed_at = 0.0
        self.hooks: list[Callable[[dict[str, Any], int], None]] = []
        self._waiters: list[tuple[Predicate, asyncio.Future[dict[str, Any]]]] = []
        self._reader: asyncio.Task[None] | None = None
        self._request_ids = 0

    async def open(self) -> Conn:
        import websockets

        self.ws = await websockets.connect(
            self.url,
            additional_headers={"Authorization": f"Bearer {self.token}"},
            max_size=None,
            compression=None,
            open_timeout=60,
            ping_interval=None,
        )
        self._reader = asyncio.create_task(self._read())
        return self

    @property
    def closed(self) -> bool:
        return self.close_code is not None

    async def _read(self) -> None:
        from websockets.exceptions import ConnectionClosed

        try:
            async for raw in self.ws:
                size = len(raw) if isinstance(raw, bytes) else len(raw.encode())
                self.frames += 1
                self.bytes += size
                frame = json.loads(raw)
                self.types[frame.get("type", "")] += 1
                if frame.get("type") == "error":
                    self.errors[frame.get("code", "")] += 1
                for hook in self.hooks:
                    hook(frame, size)
                for predicate, future in list(self._waiters):
                    if not future.done() and predicate(frame):
                        future.set_result(frame)
        except ConnectionClosed:
            pass
        finally:
            self.close_code = self.ws.close_code if self.ws.close_code is not None else 1006
            self.closed_at = time.monotonic()
            for _, future in self._waiters:
                if not future.done():
                    future.set_exception(Closed(f"closed with {self.close_code}"))

    def request_id(self) -> str:
        self._request_ids += 1
        return f"r{self._request_ids}"

    async def send(self, frame: dict[str, Any]) -> None:
        from websockets.exceptions import ConnectionClosed

        try:
            await self.ws.send(json.dumps(frame))
        except ConnectionClosed as exc:
            raise Closed(f"closed with {self.ws.close_code}") from exc

    async def wait_for(
        self, predicate: Predicate, timeout: float, send: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """The first frame (from now) that `predicate` accepts; sends `send` first, if given."""
        if self.closed:
            raise Closed(f"closed with {self.close_code}")
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        entry = (predicate, future)
        self._waiters.append(entry)
        try:
            if send is not None:
                await self.send(send)
            return await asyncio.wait_for(future, timeout)
        finally:
            self._waiters.remove(entry)

    async def ask(self, frame: dict[str, Any], reply_type: str, timeout: float = 60.0) -> dict[str, Any]:
        """Send a frame with a request_id; its reply of `reply_type` (an error raises Refused)."""
        request_id = self.request_id()
        answer = await self.wait_for(
            lambda f: f.get("request_id") == request_id and f.get("type") in (reply_type, "error"),
            timeout,
            send={**frame, "request_id": request_id},
        )
        if answer["type"] == "error":
            raise Refused(answer)
        return answer

    async def create_session(self, **fields: Any) -> dict[str, Any]:
        created = await self.ask({"type": "session.create", "model": MODEL, **fields}, "session.created")
        self.state = created["session"]
        self.session_id = self.state["id"]
        return self.state

    async def turn(self, content: str, timeout: float) -> tuple[str, float]:
        """Send a message and wait for the attached session's turn.completed: (its stop_reason, or
        `timeout, ...` when it took longer and was cancelled; the seconds until it completed or
        timed out). An error frame
        about the message raises Refused."""
        request_id = self.request_id()
        session_id = self.session_id

        def done(frame: dict[str, Any]) -> bool:
            if frame.get("type") == "error":
                return frame.get("request_id") == request_id
            return frame.get("type") == "turn.completed" and frame.get("session_id") == session_id

        sent = time.monotonic()
        try:
            frame = await self.wait_for(
                done, timeout, send={"type": "user.message", "content": content, "request_id": request_id}
            )
        except TimeoutError:
            timed_out = time.monotonic()
            try:
                await self.wait_for(
                    lambda f: f.get("type") == "turn.completed" and f.get("session_id") == session_id,
                    CANCEL_WAIT_SECONDS,
                    send={"type": "turn.cancel"},
                )
                how = f"timeout, then cancelled in {time.monotonic() - timed_out:.1f} s"
            except (TimeoutError, Closed):
                how = f"timeout, then not cancelled within {CANCEL_WAIT_SECONDS:g} s"
            return how, timed_out - sent
        if frame["type"] == "error":
            raise Refused(frame)
        return frame["stop_reason"], time.monotonic() - sent

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.ws.close()
        if self._reader is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._reader, 10)


class Bystander:
    """Another client, with its own token, running one-step turns one after the other."""

    def __init__(self, url: str, token: str) -> None:
        self.url, self.token = url, token
        self.stalls: list[float] = []
        self.outcomes: Counter[str] = Counter()
        self.conn: Conn | None = None
        self.task: asyncio.Task[None] | None = None
        self.stopping = False

    async def _connect(self) -> Conn:
        conn = await Conn(self.url, self.token).open()
        await conn.create_session(title="bystander")
        return conn

    async def start(self) -> Bystander:
        self.conn = await self._connect()
        await self.conn.turn("warm up", BYSTANDER_TURN_SECONDS)
        self.task = asyncio.create_task(self._loop())
        return self

    async def _loop(self) -> None:
        while not self.stopping:
            try:
                if self.conn is None or self.conn.closed:
                    self.conn = await self._connect()
                stop_reason, took = await self.conn.turn("ping", BYSTANDER_TURN_SECONDS)
                self.stalls.append(took)
                self.outcomes[stop_reason.split(",")[0]] += 1
            except Refused as exc:
                self.outcomes[f"error {exc.frame.get('code')}"] += 1
                await asyncio.sleep(0.2)
            except (Closed, OSError) as exc:
                self.outcomes[f"closed: {exc}"] += 1
                self.conn = None
                await asyncio.sleep(0.2)
            await asyncio.sleep(0.05)

    async def stop(self) -> dict[str, Any]:
        self.stopping = True
        if self.task is not None:
            await self.task
        if self.conn is not None:
            await self.conn.close()
        stalls = self.stalls
        return {
            "turns": len(stalls),
            "p50_s": round(percentile(stalls, 0.5), 3) if stalls else None,
            "p99_s": round(percentile(stalls, 0.99), 3) if stalls else None,
            "worst_s": round(max(stalls), 3) if stalls else None,
            "outcomes": dict(self.outcomes),
        }


# -- the attacks ----------------------------------------------------------------------------

Figures = dict[str, Any]


def mib(kib: float) -> float:
    return round(kib / 1024, 1)


async def attacker(stack: Stack, name: str, **fields: Any) -> tuple[Any, Conn]:
    token, raw = await token_create(name)
    conn = await Conn(stack.url, raw).open()
    await conn.create_session(title=name, **fields)
    return token, conn


def spawn_counter(conn: Conn) -> Counter[str]:
    """Counts, on a root's connection, the children announced and the spawn/fork calls refused
    (with the first refusal's message, the limit a fixed server names)."""
    counts: Counter[str] = Counter()

    def hook(frame: dict[str, Any], size: int) -> None:
        kind = frame.get("type")
        if kind == "session.spawned":
            counts["spawned"] += 1
        elif kind == "tool.result" and frame.get("name") in ("spawn_session", "fork_session"):
            if frame.get("is_error"):
                counts["refused"] += 1
                if not counts["refusal_noted"]:
                    counts["refusal_noted"] = 1
                    conn.state["first_refusal"] = str(frame.get("content"))[:300]
            else:
                counts["returned"] += 1

    conn.hooks.append(hook)
    return counts


async def fanout(stack: Stack, args: argparse.Namespace, bystander: Bystander | None) -> Figures:
    _, conn = await attacker(stack, "fanout", settings=FANOUT_SETTINGS)
    counts = spawn_counter(conn)
    rss_before = await stack.settled_rss()
    db_before = await db_bytes()
    message = f"@@spawn {args.fanout} @@spawn {args.fanout_children} hi"
    async with RssPeak(stack) as peak:
        stop_reason, took = await conn.turn(message, args.fanout_seconds)
    rss_after = await stack.settled_rss()
    counted = await tree(conn.session_id)
    await conn.close()
    return {
        "message": message,
        "settings": FANOUT_SETTINGS,
        "stop_reason": stop_reason,
        "seconds": round(took, 2),
        "sessions_per_user_message": counted["sessions"],
        "children_announced": counts["spawned"],
        "spawns_refused": counts["refused"],
        "first_refusal": conn.state.get("first_refusal", ""),
        "model_calls": counted["model_calls"],
        "still_running": counted["running"],
        "rss_before_mib": mib(rss_before),
        "rss_peak_mib": mib(peak.peak),
        "rss_after_mib": mib(rss_after),
        "db_added_mib": round((await db_bytes() - db_before) / MIB, 1),
    }


def _history_fill_big(session_id: str, messages: int, megabytes: float) -> None:
    from sessions_app.common.estimate import estimate_json_tokens
    from sessions_app.models import AgentSession, Message

    chars = int(megabytes * MIB)
    # Common English words drawn at random (seeded): text that a database's compression
    # (PostgreSQL's TOAST) shrinks as it would prose (zlib: to 37%), not to nothing as it does a
    # repeated phrase; about 0.23 estimated tokens a character, so ten 2 MB messages fit the window.
    rng = random.Random(31)
    rows = []
    for position in range(messages):
        words = " ".join(rng.choices(WORDS, k=chars // 4 + 1))
        text = f"message {position}: " + words[:chars]
        content = [{"type": "text", "text": text}]
        role = "user" if position % 2 == 0 else "assistant"
        estimate = estimate_json_tokens(content)
        rows.append(
            Message(
                session_id=session_id,
                position=position,
                epoch=0,
                role=role,
                content=content,
                token_estimate=estimate,
            )
        )
    Message.objects.bulk_create(rows, batch_size=1)
    AgentSession.objects.filter(pk=session_id).update(next_position=messages)


async def _fork_phase(
    stack: Stack, args: argparse.Namespace, *, name: str, messages: int, megabytes: float
) -> Figures:
    """One session of `messages` messages of `megabytes` MB whose step makes `args.forks`
    fork_session calls: what the forks made kept of the servers' memory and added to the
    database (per fork made; the parent's own steps over its history count too)."""
    _, conn = await attacker(stack, name, context_window=10_000_000)
    counts = spawn_counter(conn)
    await asyncio.to_thread(_history_fill_big, conn.session_id, messages, megabytes)
    # One plain turn first: the server loads the history (its caches hold it) before the forks.
    await conn.turn("load the history", args.fork_seconds)
    rss_before = await stack.settled_rss()
    db_before = await db_bytes()
    message = f"@@fork {args.forks} hi"
    async with RssPeak(stack) as peak:
        stop_reason, took = await conn.turn(message, args.fork_seconds)
    rss_after = await stack.settled_rss()
    db_after = await db_bytes()
    await asyncio.sleep(args.fork_pause)
    rss_paused = await stack.settled_rss()
    counted = await tree(conn.session_id)
    await conn.close()
    forks = max(counted["sessions"] - 1, 0)
    figures: Figures = {
        "history": f"{messages} messages of {megabytes:g} MB",
        "message": message,
        "stop_reason": stop_reason,
        "seconds": round(took, 2),
        "forks_made": forks,
        "forks_refused": counts["refused"],
        "first_refusal": conn.state.get("first_refusal", ""),
        "rss_before_mib": mib(rss_before),
        "rss_peak_mib": mib(peak.peak),
        "rss_after_mib": mib(rss_after),
        f"rss_after_{args.fork_pause:g}s_mib": mib(rss_paused),
        "rss_kept_mib": mib(rss_paused - rss_before),
        "db_added_mib": round((db_after - db_before) / MIB, 2),
    }
    if forks:
        figures["rss_kept_per_fork_mib"] = mib((rss_paused - rss_before) / forks)
        figures["db_added_per_fork_mib"] = round((db_after - db_before) / MIB / forks, 2)
    return figures


async def fork(stack: Stack, args: argparse.Namespace, bystander: Bystander | None) -> Figures:
    """The issue's huge history (refused by the fork limit since issue 31), then a history just
    under the default limit (`--fork-fit-messages` of `--fork-fit-kb` KB), whose forks are made."""
    huge = await _fork_phase(
        stack, args, name="fork", messages=args.fork_messages, megabytes=args.fork_message_mb
    )
    fits = await _fork_phase(
        stack, args, name="fork-fit", messages=args.fork_fit_messages, megabytes=args.fork_fit_kb / 1024
    )
    return {"huge": huge, "within_limit": fits}


def _revisions(session_id: str) -> int:
    from memory_app.notepad.models import NotepadRevision

    return NotepadRevision.objects.filter(session_id=uuid.UUID(session_id)).count()


def sandbox_outcome(frame: dict[str, Any]) -> str:
    """What a run_sandbox_code result says: the writes the code printed, or how it ended."""
    content = frame.get("content")
    if isinstance(content, list):
        content = "".join(b.get("text", "") for b in content if isinstance(b, dict))
    result: Any = None
    with contextlib.suppress(ValueError, TypeError):
        result = json.loads(content or "")
    if not isinstance(result, dict):
        return f"tool error: {str(content)[:200]}" if frame.get("is_error") else str(content)[:200]
    found = re.search(r"writes (\d+)", str(result.get("stdout", "")))
    stopped = re.search(r"stopped: (.*)", str(result.get("stdout", "")))
    parts = [f"{found.group(1)} writes" if found else "no count printed"]
    if stopped:
        parts.append(f"stopped by {stopped.group(1)[:120]}")
    if result.get("timed_out"):
        parts.append("timed out")
    parts.append(f"exit {result.get('exit_code')}, {result.get('duration_ms')} ms")
    return "; ".join(parts)


async def sandbox(stack: Stack, args: argparse.Namespace, bystander: Bystander | None) -> Figures:
    _, conn = await attacker(stack, "sandbox")
    if not conn.state.get("sandbox"):
        await conn.close()
        return {"skipped": "the server offers no sandbox here (PALIMPSEST_SANDBOX, bubblewrap)"}
    updates: Counter[str] = Counter()
    runs: list[str] = []

    def hook(frame: dict[str, Any], size: int) -> None:
        if frame.get("type") == "notepad.updated":
            updates["frames"] += 1
            updates["bytes"] += size
        elif frame.get("type") == "tool.result" and frame.get("name") == "run_sandbox_code":
            runs.append(sandbox_outcome(frame))

    conn.hooks.append(hook)
    db_before = await db_bytes()
    code = SANDBOX_CODE.format(writes=args.sandbox_writes)
    stop_reason, took = await conn.turn(f"@@run {args.sandbox_runs} {code}", args.sandbox_seconds)
    db_added = await db_bytes() - db_before
    revisions = await asyncio.to_thread(_revisions, conn.session_id)
    await conn.close()
    per = max(len(runs), 1)
    return {
        "code": f'session.notepad.write(str(i) + " " + "x" * 99_000), for i in range({args.sandbox_writes})',
        "stop_reason": stop_reason,
        "seconds": round(took, 2),
        "runs": len(runs),
        "run_outcomes": runs,
        "notepad_revision_rows": revisions,
        "db_added_mib": round(db_added / MIB, 1),
        "db_per_run_mib": round(db_added / MIB / per, 1),
        "notepad_updated_frames": updates["frames"],
        "notepad_updated_mib": round(updates["bytes"] / MIB, 1),
        "notepad_updated_per_run_mib": round(updates["bytes"] / MIB / per, 1),
    }


async def revocation(stack: Stack, args: argparse.Namespace, bystander: Bystander | None) -> Figures:
    from django.utils import timezone

    from sessions_app.tokens import agent_tokens_revoke

    token, conn = await attacker(
        stack,
        "revocation",
        settings={"subsessions": {"max_concurrent": args.revoke_children}, "max_steps_per_turn": 1000},
    )
    counts = spawn_counter(conn)
    steps = 1000
    message = f"@@spawn {args.revoke_children} @@loop {steps} {args.revoke_step_seconds:g}"
    await conn.send({"type": "user.message", "content": message, "request_id": conn.request_id()})
    deadline = time.monotonic() + 60
    while counts["spawned"] < args.revoke_children and not conn.closed and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    await asyncio.sleep(args.revoke_after)
    before = await tree(conn.session_id)
    revoked_wall = timezone.now()
    revoked_at = time.monotonic()
    await asyncio.to_thread(agent_tokens_revoke, tokens=[token])
    await asyncio.sleep(args.revoke_watch)
    after = await tree(conn.session_id, model_calls_since=revoked_wall)
    calls_after = await asyncio.to_thread(stack.fake.calls, revoked_at)
    await conn.close()
    return {
        "message": message,
        "children_running_at_revocation": counts["spawned"],
        "model_calls_before_revocation": before["model_calls"],
        "socket_closed_s_after_revocation": (
            round(conn.closed_at - revoked_at, 2) if conn.closed_at >= revoked_at else None
        ),
        "close_code": conn.close_code,
        "watched_s": args.revoke_watch,
        "model_calls_after_revocation": calls_after,
        "model_call_rows_after_revocation": after["model_calls_since"],
        "sessions_still_running": after["running"],
    }


async def flood_phase(
    stack: Stack,
    conn: Conn,
    frame_of: Callable[[int], str],
    rate: float,
    seconds: float,
    drain: float,
    reconnect: Callable[[], Awaitable[Conn]] | None = None,
) -> dict[str, Any]:
    """Send frames at `rate` a second for `seconds` (a frame's request_id is its number), then
    wait up to `drain` seconds for the answers. Counts answers by kind. With `reconnect`, a
    connection the server closes is replaced by a new one (as a hostile client would) until the
    time is up; the figures cover every connection."""
    from websockets.exceptions import ConnectionClosed

    counts: Counter[str] = Counter()
    last_answer = 0.0

    def hook(frame: dict[str, Any], size: int) -> None:
        nonlocal last_answer
        if isinstance(frame.get("request_id"), int):
            counts["answers"] += 1
            counts[frame.get("code") or frame["type"]] += 1
            last_answer = time.monotonic()

    conns = [conn]
    conn.hooks.append(hook)
    limited_before = conn.errors["rate_limited"]
    # Frames sent on a connection the server then closed, never answered: lost with it.
    lost = 0
    conn_sent = conn_answered = 0
    rss_before = await stack.settled_rss()
    sent = 0
    async with RssPeak(stack) as peak:
        began = time.monotonic()
        # A send waits while the server does not read (TCP's flow control): the phase still
        # ends after `seconds`, with fewer frames sent than the rate asked.
        while time.monotonic() - began < seconds:
            try:
                while (now := time.monotonic()) - began < seconds and not conn.closed:
                    due = min(int((now - began) * rate) + 1, int(rate * seconds))
                    while sent < due and time.monotonic() - began < seconds:
                        await conn.ws.send(frame_of(sent))
                        sent += 1
                    await asyncio.sleep(0.005)
            except ConnectionClosed:
                pass
            if reconnect is None or time.monotonic() - began >= seconds:
                break
            closing = time.monotonic()
            while not conn.closed and time.monotonic() - closing < 5:  # its close may be on the way
                await asyncio.sleep(0.01)
            lost += (sent - conn_sent) - (counts["answers"] - conn_answered)
            conn_sent, conn_answered = sent, counts["answers"]
            conn = await reconnect()
            conn.hooks.append(hook)
            conns.append(conn)
        sent_by = time.monotonic()
        while counts["answers"] < sent - lost and not conn.closed and time.monotonic() - sent_by < drain:
            await asyncio.sleep(0.05)
    for each in conns:
        each.hooks.remove(hook)
    rss_after = await stack.settled_rss()
    answered = counts.pop("answers", 0)
    limited = sum(each.errors["rate_limited"] for each in conns) - limited_before
    return {
        "frames_sent": sent,
        "connections": len(conns),
        "sent_per_s": round(sent / max(sent_by - began, 1e-9)),
        "answered": answered,
        "answers_per_s": round(answered / max(last_answer - began, 1e-9)) if answered else 0,
        "answers_by_kind": dict(counts),
        # Also those without a request_id (a server may refuse before it parses the frame).
        "rate_limited": max(counts["rate_limited"], limited),
        # When some were still unanswered after the wait, the last answer is later than that.
        "last_answer_s_after_last_frame": (
            f"> {drain:g}" if sent - lost > answered and not conn.closed else round(last_answer - sent_by, 2)
        )
        if answered
        else None,
        "unanswered": sent - answered,
        "lost_with_a_closed_connection": lost,
        "closed_by_server": [each.close_code for each in conns if each.close_code is not None][:3],
        "rss_before_mib": mib(rss_before),
        "rss_peak_mib": mib(peak.peak),
        "rss_after_mib": mib(rss_after),
        "rss_kept_per_100_frames_kib": round((rss_after - rss_before) * 100 / sent, 1) if sent else None,
    }


async def _flood_attack(
    stack: Stack, name: str, frame_of: Callable[[int], str], rate: float, seconds: float, drain: float
) -> dict[str, Any]:
    _, conn = await attacker(stack, name)
    conns = [conn]

    async def reconnect() -> Conn:
        again = await Conn(stack.url, conn.token).open()
        await again.create_session(title=name)
        conns.append(again)
        return again

    figures = await flood_phase(stack, conn, frame_of, rate, seconds, drain, reconnect=reconnect)
    for each in conns:
        await each.close()
    return figures


async def flood(stack: Stack, args: argparse.Namespace, bystander: Bystander | None) -> Figures:
    small = '{"type": "session.get", "request_id": %d}'
    return await _flood_attack(
        stack, "flood", lambda n: small % n, args.flood_rate, args.flood_seconds, args.flood_drain
    )


async def bigframes(stack: Stack, args: argparse.Namespace, bystander: Bystander | None) -> Figures:
    pad = "x" * args.big_kb * 1000
    big = '{"type": "session.get", "request_id": %d, "pad": "' + pad + '"}'
    figures = await _flood_attack(
        stack, "bigframes", lambda n: big % n, args.big_rate, args.big_seconds, args.flood_drain
    )
    return {"frame_kb": args.big_kb, **figures}


def _tree_copy(root_id: str, child_id: str, descendants: int, per_parent: int) -> int:
    """`descendants - 1` copies of the real child's row and events under the root: the first
    `per_parent` children of the root, the rest children of those (depth 2). Returns the events
    each copy holds."""
    from sessions_app.models import AgentSession, SessionEvent

    child = AgentSession.objects.get(pk=child_id)
    events = list(SessionEvent.objects.filter(session_id=uuid.UUID(child_id)).order_by("seq"))
    fields = {
        "owner_id": child.owner_id,
        "model": child.model,
        "context_window": child.context_window,
        "settings": child.settings,
        "status": "idle",
        "root_session_id": root_id,
        "spawn_mode": "spawn",
        "last_seq": child.last_seq,
    }
    level1 = [
        AgentSession(title=f"copy {n}", parent_session_id=root_id, depth=1, **fields)
        for n in range(min(per_parent - 1, descendants - 1))
    ]
    AgentSession.objects.bulk_create(level1, batch_size=500)
    parents = [child, *level1]
    level2 = [
        AgentSession(title=f"copy {n}", parent_session_id=parents[n % len(parents)].pk, depth=2, **fields)
        for n in range(descendants - 1 - len(level1))
    ]
    AgentSession.objects.bulk_create(level2, batch_size=500)
    rows = [
        SessionEvent(session_id=copy.pk, seq=e.seq, type=e.type, payload=e.payload)
        for copy in level1 + level2
        for e in events
    ]
    SessionEvent.objects.bulk_create(rows, batch_size=2000)
    return len(events)


async def reattach(stack: Stack, args: argparse.Namespace, bystander: Bystander | None) -> Figures:
    _, conn = await attacker(stack, "reattach")
    spawned = spawn_counter(conn)
    child: list[str] = []
    conn.hooks.append(
        lambda f, s: child.append(f["child_session_id"]) if f.get("type") == "session.spawned" else None
    )
    await conn.turn("@@spawn 1 hi", 60)
    await conn.close()
    if not child:
        return {"skipped": f"the root's spawn made no child ({dict(spawned)})"}
    per_child = await asyncio.to_thread(
        _tree_copy, conn.session_id, child[0], args.descendants, args.per_parent
    )
    rss_before = await stack.settled_rss()
    again = await Conn(stack.url, conn.token).open()
    attached_size = 0

    def hook(frame: dict[str, Any], size: int) -> None:
        nonlocal attached_size
        if frame.get("type") == "session.attached":
            attached_size = size

    again.hooks.append(hook)
    began = time.monotonic()
    try:
        attached = await again.ask(
            {"type": "session.attach", "session_id": conn.session_id, "since_seqs": {}},
            "session.attached",
            args.reattach_seconds,
        )
        outcome = "attached"
    except (TimeoutError, Closed, Refused) as exc:
        attached, outcome = {}, f"{type(exc).__name__}: {exc}"
    took = time.monotonic() - began
    rss_after = stack.rss()
    frames, size = again.frames, again.bytes
    await again.close()
    return {
        "descendants": args.descendants,
        "events_per_descendant": per_child,
        "outcome": outcome,
        "seconds": round(took, 2),
        "frames_replayed": frames - 1 if attached else frames,
        "bytes_received_mib": round(size / MIB, 2),
        "session_attached_kib": round(attached_size / 1024, 1),
        "descendants_listed": len(attached.get("descendants") or []),
        "rss_before_mib": mib(rss_before),
        "rss_after_mib": mib(rss_after),
    }


Attack = Callable[[Stack, argparse.Namespace, Bystander | None], Awaitable[Figures]]
# name -> (the attack, whether another client's turns run alongside)
ATTACKS: dict[str, tuple[Attack, bool]] = {
    "fanout": (fanout, True),
    "fork": (fork, True),
    "sandbox": (sandbox, True),
    "revocation": (revocation, False),
    "flood": (flood, True),
    "bigframes": (bigframes, True),
    "reattach": (reattach, False),
}


async def attack_run(
    name: str, args: argparse.Namespace, env: dict[str, str], folder: Path, fake: AbuseFake
) -> Figures:
    run, alongside = ATTACKS[name]
    log(f"{name}: starting {args.processes} daphne process(es)")
    async with Stack(env, args.processes, folder, fake, name) as stack:
        bystander = None
        note = ""
        if alongside:
            _, raw = await token_create(f"{name}-bystander")
            try:
                bystander = await Bystander(stack.url, raw).start()
            except Exception as exc:  # the attack still runs, without the other client
                log(f"{name}: the other client could not start: {exc!r}")
                note = repr(exc)
        began = time.monotonic()
        try:
            figures = await run(stack, args, bystander)
        except Exception as exc:  # one attack failing does not stop the others
            log(f"{name}: failed: {exc!r}")
            figures = {"failed": repr(exc)}
        figures["attack_s"] = round(time.monotonic() - began, 1)
        if bystander is not None:
            figures["other_client"] = await bystander.stop()
        elif note:
            figures["other_client"] = {"failed_to_start": note}
    log(f"{name}: done in {figures['attack_s']} s")
    return figures


def table(name: str, figures: Figures) -> str:
    """One attack's figures, a row each (nested ones with dotted names)."""
    rows: list[tuple[str, str]] = []

    def add(prefix: str, value: Any) -> None:
        if isinstance(value, dict) and not prefix.endswith(("settings", "answers_by_kind", "outcomes")):
            for key, inner in value.items():
                add(f"{prefix}.{key}" if prefix else key, inner)
        else:
            rows.append((prefix, json.dumps(value) if isinstance(value, dict | list) else str(value)))

    add("", figures)
    width = max(len(label) for label, _ in rows)
    return "\n".join([f"== {name} ==", *(f"  {label.ljust(width)}  {value}" for label, value in rows)])


async def main_async(args: argparse.Namespace, env: dict[str, str], folder: Path) -> dict[str, Figures]:
    fake = await asyncio.to_thread(AbuseFake)
    results: dict[str, Figures] = {}
    try:
        names = list(ATTACKS) if args.attack == "all" else [args.attack]
        for name in names:
            results[name] = await attack_run(name, args, env, folder, fake)
            if not args.json:
                print(table(name, results[name]), flush=True)
    finally:
        fake.stop()
    return results


def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("attack", choices=["all", *ATTACKS])
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON document")
    parser.add_argument("--fanout", type=int, default=60, help="the root's spawn_session calls")
    parser.add_argument("--fanout-children", type=int, default=60, help="each child's spawn_session calls")
    parser.add_argument("--fanout-seconds", type=float, default=60, help="then the turn is cancelled")
    parser.add_argument("--forks", type=int, default=16, help="fork_session calls of the step")
    parser.add_argument("--fork-messages", type=int, default=10)
    parser.add_argument("--fork-message-mb", type=float, default=2.0)
    parser.add_argument(
        "--fork-fit-messages", type=int, default=10, help="the second history, under the fork limit"
    )
    parser.add_argument("--fork-fit-kb", type=float, default=80, help="its messages' size")
    parser.add_argument("--fork-seconds", type=float, default=120)
    parser.add_argument("--fork-pause", type=float, default=10, help="seconds before RSS is read again")
    parser.add_argument("--sandbox-runs", type=int, default=1, help="steps, each one sandbox run")
    parser.add_argument("--sandbox-writes", type=int, default=1000, help="notepad writes each run tries")
    parser.add_argument("--sandbox-seconds", type=float, default=120)
    parser.add_argument("--revoke-children", type=int, default=4)
    parser.add_argument("--revoke-step-seconds", type=float, default=0.5, help="the model's time per step")
    parser.add_argument("--revoke-after", type=float, default=2, help="seconds of the children's work first")
    parser.add_argument("--revoke-watch", type=float, default=10, help="seconds model calls are counted")
    parser.add_argument("--flood-rate", type=float, default=2000, help="session.get frames a second")
    parser.add_argument("--flood-seconds", type=float, default=10)
    parser.add_argument("--big-kb", type=int, default=200, help="size of each large frame")
    parser.add_argument("--big-rate", type=float, default=400, help="large frames a second")
    parser.add_argument("--big-seconds", type=float, default=10)
    parser.add_argument("--flood-drain", type=float, default=30, help="seconds to wait for the answers")
    parser.add_argument("--descendants", type=int, default=3660, help="descendants of the reattached root")
    parser.add_argument("--per-parent", type=int, default=60, help="children of the root (the rest below)")
    parser.add_argument("--reattach-seconds", type=float, default=120)
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--database-url", default="", help="PostgreSQL (default: a temporary SQLite file)")
    parser.add_argument("--redis-url", default="", help="the channel layer (needed for --processes > 1)")
    args = parser.parse_args()
    if args.processes > 1 and not (args.database_url and args.redis_url):
        parser.error("several processes need --database-url and --redis-url")
    folder = bench_folder("palimpsest-abuse-")
    env = django_configure(folder, args.database_url, args.redis_url)
    # The server's own quotas and limits at their defaults (bench_server lifts the quotas), and
    # the sandbox where this machine can run it.
    for name in (
        "PALIMPSEST_QUOTA_SESSIONS_PER_MINUTE",
        "PALIMPSEST_QUOTA_CONNECTIONS",
        "PALIMPSEST_QUOTA_FRAMES_PER_SECOND",
    ):
        env.pop(name)
    env["PALIMPSEST_SANDBOX"] = "auto"
    setup = {
        "database": "PostgreSQL" if args.database_url else "SQLite",
        "channel_layer": "Redis" if args.redis_url else "in-memory",
        "processes": args.processes,
        "cpus": os.cpu_count(),
        "load_before": round(os.getloadavg()[0], 2),
    }
    log(f"setup: {setup}")
    results = asyncio.run(main_async(args, env, folder))
    setup["load_after"] = round(os.getloadavg()[0], 2)
    if args.json:
        print(json.dumps({"setup": setup, "attacks": results}, indent=2))
    else:
        print(f"setup: {json.dumps(setup)}")


if __name__ == "__main__":
    main()
