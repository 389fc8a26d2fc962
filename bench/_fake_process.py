"""The fake Messages API (`tests/fake_anthropic.py`) in a process of its own, so that its work
does not share an interpreter (and its lock) with the client that measures.

Prints its URL on the first line, then answers one command per line on standard input:
`stats` prints a JSON list of [started, ended, headers_at] (time.monotonic()) of every model
call since the last `stats` (`ended` minus the model's latency; `headers_at`: when its headers
had arrived, its body then on its way), and forgets them (and their bodies).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fake_anthropic import FakeAnthropicServer, text  # noqa: E402


def main() -> None:
    latency = float(sys.argv[1]) if len(sys.argv) > 1 else 0.0
    fake = FakeAnthropicServer(latency_seconds=latency, cheap_usage=True)
    fake.default_reply = text("ok, done.")
    fake.start()
    print(fake.url, flush=True)
    for line in sys.stdin:
        if line.strip() == "stats":
            with fake._lock:
                spans = [[r.started, r.ended, r.headers_at] for r in fake.requests if r.ended]
                fake.requests[:] = [r for r in fake.requests if not r.ended]
            print(json.dumps(spans), flush=True)
    fake.stop()


if __name__ == "__main__":
    main()
