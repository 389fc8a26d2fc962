"""The fake Messages API (`tests/fake_anthropic.py`) in a process of its own, answering the
directives of `bench_abuse.py`, so that a client drives a hostile model deterministically.

The model reads the last text block of the latest user message that holds text (a turn's message,
or a child's task) and the steps it already took after it (the assistant messages since):

| directive | it does |
|---|---|
| `@@spawn N TASK` | first step: N `spawn_session` calls, each with the task TASK; then "done" |
| `@@fork N TASK` | the same with `fork_session` |
| `@@run K CODE` | K steps, each one `run_sandbox_code` call with CODE; then "done" |
| `@@loop N SECONDS` | N steps, each answered after SECONDS with a `read_notepad` call; then "done" |
| anything else | "ok" |

Prints its URL on the first line, then answers one command per line on standard input:
`calls SINCE` prints how many model calls (POST /v1/messages) arrived at or after SINCE
(time.monotonic(), the same clock in every process of the machine) and how many in all.
Request bodies are dropped once answered, so that 20 MB forks do not pile up here.
"""

from __future__ import annotations

import itertools
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fake_anthropic import FakeAnthropicServer, Reply, _Handler, text  # noqa: E402

DIRECTIVE = re.compile(r"@@(spawn|fork|run|loop)\s+(\d+)\s+(.*)", re.DOTALL)
_ids = itertools.count(1)
TOOL = {"spawn": "spawn_session", "fork": "fork_session", "run": "run_sandbox_code", "loop": "read_notepad"}


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text"]


def _tool_uses(name: str, inputs: list[dict[str, Any]]) -> Reply:
    content: list[dict[str, Any]] = [{"type": "text", "text": f"Calling {name}."}]
    for tool_input in inputs:
        content.append(
            {"type": "tool_use", "id": f"toolu_{next(_ids):024d}", "name": name, "input": tool_input}
        )
    return Reply(content, stop_reason="tool_use")


def reply(body: dict[str, Any]) -> Reply:
    messages = body.get("messages") or []
    index = len(messages) - 1
    while index >= 0 and not (
        messages[index].get("role") == "user" and any(_texts(messages[index]["content"]))
    ):
        index -= 1
    if index < 0:
        return text("ok")
    last = [t for t in _texts(messages[index]["content"]) if t][-1]
    steps = sum(1 for m in messages[index + 1 :] if m.get("role") == "assistant")
    start = last.find("@@")
    match = DIRECTIVE.match(last[start:]) if start >= 0 else None
    if match is None:
        return text("done" if steps else "ok")
    kind, count, rest = match.group(1), int(match.group(2)), match.group(3).strip()
    name = TOOL[kind]
    if kind in ("spawn", "fork"):
        if steps:
            return text("done")
        return _tool_uses(name, [{"task": rest, "title": f"{kind} {n}"} for n in range(count)])
    if steps >= count:
        return text("done")
    if kind == "run":
        return _tool_uses(name, [{"code": rest}])
    time.sleep(float(rest.split()[0]))
    return _tool_uses(name, [{}])


class Fake(FakeAnthropicServer):
    """Keeps each call's arrival time, not its body."""

    def __init__(self) -> None:
        super().__init__(cheap_usage=True)
        self.arrivals: list[float] = []

    def _handle(self, handler: _Handler, method: str) -> None:
        try:
            super()._handle(handler, method)
        finally:
            with self._lock:
                for record in self.requests:
                    self.arrivals.append(record.headers_at)
                self.requests.clear()
                self.other_requests.clear()


def main() -> None:
    fake = Fake()
    fake.default_reply = reply
    fake.start()
    assert fake._httpd is not None
    # A daphne stopped between attacks resets its kept-alive connections: not worth a traceback.
    fake._httpd.handle_error = lambda request, client_address: None  # type: ignore[method-assign]
    print(fake.url, flush=True)
    for line in sys.stdin:
        command = line.split()
        if command and command[0] == "calls":
            since = float(command[1])
            with fake._lock:
                arrivals = fake.arrivals + [r.headers_at for r in fake.requests]
            print(
                json.dumps({"since": sum(1 for a in arrivals if a >= since), "all": len(arrivals)}),
                flush=True,
            )
    fake.stop()


if __name__ == "__main__":
    main()
