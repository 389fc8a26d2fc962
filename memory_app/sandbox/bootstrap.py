"""Runs inside the jail: applies the limits, defines the global `session`, runs the user's code.

Started as `python -I -S -B -c <this source> <config json>`; the code arrives on stdin (then stdin is
/dev/null). Standard library only: nothing of the project exists inside the jail.

`session.notepad.read()`, `.write(content)` and `.append(text)` are synchronous calls carried to the
server over two inherited pipes, one JSON object per line (bridge.py has the server's side):
    request  {"id": 1, "op": "read"} | {"id": 2, "op": "write", "content": "..."}
             | {"id": 3, "op": "append", "text": "..."}
    reply    {"id": 1, "ok": true, "content": "..."} | {"id": 2, "ok": true}
             | {"id": 3, "ok": false, "error": "..."}
A refused call raises `session.NotepadError` (also the bridge closing, or a request over the line
limit). Where the session has no notepad, `session.notepad` is falsy and every call raises it too.
Only the process that started the code may use the bridge: a forked child gets NotepadError.

A call of an authored tool (`result_fd` in the config): stdin holds `{"code", "args"}` as JSON;
after the code ran, `run(args, session)` is called, and its outcome goes back as one JSON object
on the result pipe (never on stdout, which the code writes freely):
    {"ok": true, "value": <what run returned>}
    | {"ok": false, "kind": "exception" | "memory" | "not_json" | "too_large" | "no_run",
       "error": "<the traceback, or what is wrong>"}
The value is JSON (no NaN, no infinity) of at most `result_max_bytes` bytes.
"""

from __future__ import annotations

import builtins
import json
import linecache
import os
import resource
import site
import sys
import threading
import traceback
from typing import Any

SOURCE_NAME = "<sandbox>"
READY_BYTE = b"R"  # process.py reads the same
NOTEPAD_OFF = "the session notepad is switched off for this session"


class NotepadError(Exception):
    """The server refused a notepad call (e.g. over the notepad's size limit), or the bridge is closed."""


class _Bridge:
    """The client end of the line-delimited JSON protocol; one call at a time, from one process."""

    def __init__(self, *, request_fd: int, reply_fd: int, max_line_bytes: int) -> None:
        self.request_fd = request_fd
        self.reply_fd = reply_fd
        self._replies = os.fdopen(reply_fd, "rb", buffering=64 * 1024)
        self._max_line_bytes = max_line_bytes
        self._lock = threading.Lock()
        self._last_id = 0
        self._owner = os.getpid()

    def call(self, op: str, **fields: str) -> dict[str, Any]:
        if os.getpid() != self._owner:
            raise NotepadError("session.notepad is only available in the process that started the code")
        with self._lock:
            self._last_id += 1
            request_id = self._last_id
            line = json.dumps({"id": request_id, "op": op, **fields}, ensure_ascii=False).encode() + b"\n"
            if len(line) > self._max_line_bytes:
                raise NotepadError(
                    f"notepad request too large ({len(line)} bytes, at most {self._max_line_bytes})"
                )
            try:
                view = memoryview(line)
                while view:
                    view = view[os.write(self.request_fd, view) :]
                while True:
                    raw = self._replies.readline()
                    if not raw:
                        raise NotepadError("the notepad bridge is closed")
                    reply = json.loads(raw)
                    # Replies to lines the code wrote to the pipe itself come first; skip them.
                    if isinstance(reply, dict) and reply.get("id") == request_id:
                        break
            except OSError as exc:
                raise NotepadError(f"the notepad bridge is closed ({exc.strerror})") from None
        if not reply.get("ok"):
            raise NotepadError(str(reply.get("error", "the notepad call failed")))
        return reply


class Notepad:
    """`session.notepad`: the session's notepad, read and edited live (each edit is a revision)."""

    def __init__(self, bridge: _Bridge | None) -> None:
        self._bridge = bridge

    def __bool__(self) -> bool:
        return self._bridge is not None

    def __repr__(self) -> str:
        return "<session.notepad>" if self._bridge else "<session.notepad (switched off)>"

    def _call(self, op: str, **fields: str) -> dict[str, Any]:
        if self._bridge is None:
            raise NotepadError(NOTEPAD_OFF)
        return self._bridge.call(op, **fields)

    def read(self) -> str:
        """The notepad's whole content ("" before anything was written)."""
        return str(self._call("read").get("content", ""))

    def write(self, content: str) -> None:
        """Replace the whole notepad with `content`."""
        if not isinstance(content, str):
            raise TypeError("session.notepad.write(content): content must be a string")
        self._call("write", content=content)

    def append(self, text: str) -> None:
        """Add `text` at the end, exactly as given (no separator is added)."""
        if not isinstance(text, str):
            raise TypeError("session.notepad.append(text): text must be a string")
        self._call("append", text=text)


class Session:
    """The global `session` of the seed's sandbox API."""

    NotepadError = NotepadError

    def __init__(self, notepad: Notepad) -> None:
        self.notepad = notepad

    def __repr__(self) -> str:
        return f"<session notepad={self.notepad!r}>"


def _read_code() -> str:
    code = sys.stdin.buffer.read()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return code.decode("utf-8")


# How much of a traceback a call's outcome carries (its end: the last frames and the error).
CALL_TRACEBACK_MAX_CHARS = 8000


def _traceback_text(exc: BaseException) -> str:
    tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
    try:
        text = "".join(traceback.format_exception(type(exc), exc, tb))
    except BaseException:  # formatting can fail too (no memory left)
        text = f"{type(exc).__name__}: {exc!r}"
    return text[-CALL_TRACEBACK_MAX_CHARS:]


def _failure(kind: str, error: str) -> bytes:
    return json.dumps({"ok": False, "kind": kind, "error": error}, ensure_ascii=False).encode()


def _call_outcome(namespace: dict[str, Any], args: Any, max_bytes: int) -> bytes:
    """The outcome of `run(args, session)` as the result pipe carries it."""
    entry = namespace.get("run")
    if not callable(entry):
        return _failure("no_run", "the code defines no function run(args, session)")
    try:
        value = entry(args, namespace["session"])
    except MemoryError as exc:
        return _failure("memory", _traceback_text(exc))
    except BaseException as exc:
        _print_error(exc)
        return _failure("exception", _traceback_text(exc))
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        return _failure("not_json", f"{type(exc).__name__}: {exc}")
    except MemoryError as exc:
        return _failure("memory", _traceback_text(exc))
    data = text.encode("utf-8", errors="surrogatepass")
    if len(data) > max_bytes:
        return _failure("too_large", str(len(data)))
    return b'{"ok": true, "value": ' + data + b"}"


def _send_outcome(fd: int, data: bytes) -> None:
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def _apply_limits(limits: list[list[Any]]) -> None:
    """Lower soft and hard limits: without CAP_SYS_RESOURCE (none here) they cannot be raised again."""
    for name, soft, hard in limits:
        resource.setrlimit(getattr(resource, name), (int(soft), int(hard)))


def _print_error(exc: BaseException) -> None:
    """Print like Python does for a script, without this bootstrap's own frame."""
    tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
    traceback.print_exception(type(exc), exc, tb)


def main() -> None:
    config = json.loads(sys.argv[1])
    code = _read_code()
    result_fd = config.get("result_fd")
    args: Any = None
    if result_fd is not None:
        call = json.loads(code)
        code, args = call["code"], call["args"]
    bridge = None
    if config["notepad"]:
        bridge = _Bridge(
            request_fd=config["request_fd"],
            reply_fd=config["reply_fd"],
            max_line_bytes=config["max_line_bytes"],
        )
    session = Session(Notepad(bridge))
    site.setquit()  # `exit()` and `quit()`, which -S leaves out
    sys.argv = [SOURCE_NAME]
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    linecache.cache[SOURCE_NAME] = (len(code), None, code.splitlines(keepends=True), SOURCE_NAME)
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins, "session": session}
    # Everything from compiling on is the user's: under the limits, after the server's "ready".
    _apply_limits(config["limits"])
    os.nice(config["nice"])
    if config["ready_fd"] is not None:
        os.write(config["ready_fd"], READY_BYTE)
        os.close(config["ready_fd"])
    try:
        compiled = compile(code, SOURCE_NAME, "exec", dont_inherit=True)
    except (SyntaxError, ValueError, MemoryError) as exc:
        traceback.print_exception(type(exc), exc, None)
        if result_fd is not None:
            _send_outcome(result_fd, _failure("exception", "".join(traceback.format_exception_only(exc))))
        sys.exit(1)
    try:
        exec(compiled, namespace)
    except SystemExit:
        if result_fd is None:
            raise
        _send_outcome(result_fd, _failure("exception", "SystemExit: the code exited before run was called"))
        sys.exit(1)
    except BaseException as exc:
        _print_error(exc)
        if result_fd is not None:
            kind = "memory" if isinstance(exc, MemoryError) else "exception"
            _send_outcome(result_fd, _failure(kind, _traceback_text(exc)))
        sys.exit(1)
    if result_fd is not None:
        _send_outcome(result_fd, _call_outcome(namespace, args, int(config["result_max_bytes"])))


if __name__ == "__main__":
    main()
