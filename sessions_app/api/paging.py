"""Lists as `{"items", "next"}` (PROTOCOL.md, "HTTP API v1"): `?limit=` (at most MAX_LIMIT) and
`?cursor=`, the `next` of the page before. A cursor is opaque to clients: the position after the
page's last item (`listing_selectors` pages by it), as URL-safe base64 of JSON. A cursor this
server did not give is a 400 `invalid_value`."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from ninja import Query

from sessions_app.api.errors import invalid

MAX_LIMIT = 100
DEFAULT_LIMIT = 50
# The largest seq or version number a query or cursor may name (JSON's exact integers): a bigger
# one cannot be stored, and would overflow the database's integer.
POSITION_MAX = 2**53 - 1


# The query parameters of every list.
LIMIT = Query(DEFAULT_LIMIT, ge=1, le=MAX_LIMIT, description=f"items per page, at most {MAX_LIMIT}")
CURSOR = Query(None, description="the `next` of the page before (opaque)")


def cursor_encode(position: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(position, separators=(",", ":")).encode()).decode().rstrip("=")


def cursor_decode(cursor: str | None, kind: type | tuple[type, ...]) -> Any:
    """The position a cursor holds (None for none), if it is of `kind`; else a 400."""
    if cursor is None:
        return None
    try:
        position = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        position = None
    if not isinstance(position, kind) or isinstance(position, bool):
        raise invalid("cursor: not a cursor this list gave; start again without one")
    return position
