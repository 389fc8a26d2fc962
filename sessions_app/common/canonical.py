"""The canonical JSON that requests are hashed and compared in (the call records, the prefix
measure, the dashboard's inspector)."""

from __future__ import annotations

import json
from typing import Any

# A request's top-level keys in the order the prompt is read (and cached): tools, system, messages.
PROMPT_ORDER = ("tools", "system", "messages")


# One encoder for every call: `json.dumps` with options builds a new `JSONEncoder` each time, and a
# request's build encodes a dozen values.
_SORTED_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode


def sorted_json(value: Any) -> str:
    """`json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)`."""
    return _SORTED_JSON(value)


def canonical_json(value: Any, *, encoded: dict[str, str] | None = None) -> bytes:
    """The canonical JSON of a request or a part of it (what is hashed and compared): compact,
    objects' keys sorted (PostgreSQL's jsonb does not keep key order, so a recorded request is
    checked against this form), but a request's own keys in prompt order, so that comparing two
    requests byte by byte follows what prompt caching compares. `encoded`: a request's values
    already in this form (`sorted_json`), by key, used instead of encoding them again."""
    if not (isinstance(value, dict) and "messages" in value):
        return sorted_json(value).encode()
    known = encoded or {}
    keys = [k for k in sorted(value) if k not in PROMPT_ORDER] + [k for k in PROMPT_ORDER if k in value]
    return (
        "{"
        + ",".join(f"{sorted_json(k)}:{known[k] if k in known else sorted_json(value[k])}" for k in keys)
        + "}"
    ).encode()
