"""Exit 0 when PostgreSQL and Redis answer; else explain, and exit 1 (or 2 when they are required).

`make test-services` runs the `services` tests only when this says yes; CI sets
PALIMPSEST_REQUIRE_SERVICES=1 so that missing servers fail the build instead of skipping.
"""

from __future__ import annotations

import os
import socket
import sys
from urllib.parse import urlparse

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/palimpsest"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


def reachable(url: str, default_port: int) -> bool:
    parsed = urlparse(url)
    try:
        with socket.create_connection(
            (parsed.hostname or "127.0.0.1", parsed.port or default_port), timeout=2
        ):
            return True
    except OSError:
        return False


def main() -> int:
    required = os.environ.get("PALIMPSEST_REQUIRE_SERVICES") == "1"
    database_url = os.environ.get("PALIMPSEST_TEST_DATABASE_URL", DEFAULT_DATABASE_URL)
    redis_url = os.environ.get("PALIMPSEST_TEST_REDIS_URL", DEFAULT_REDIS_URL)
    missing = [
        name
        for name, url, port in (("PostgreSQL", database_url, 5432), ("Redis", redis_url, 6379))
        if not reachable(url, port)
    ]
    if not missing:
        return 0
    message = f"{' and '.join(missing)} not reachable: the services tests did not run."
    if required:
        sys.stderr.write(message + " PALIMPSEST_REQUIRE_SERVICES=1, so this fails.\n")
        return 2
    sys.stderr.write(message + " Set PALIMPSEST_REQUIRE_SERVICES=1 to make this an error.\n")
    return 1


if __name__ == "__main__":
    sys.exit(main())
