"""`python -m palimpsest_client chat [--url URL] [--token TOKEN] [--session ID] [--agent NAME]`."""

from __future__ import annotations

import sys

from palimpsest_client import chat

USAGE = "usage: python -m palimpsest_client chat [--url URL] [--token TOKEN] [--session ID] [--agent NAME]\n"


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "chat":
        sys.stderr.write(USAGE)
        return 2
    return chat.main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
