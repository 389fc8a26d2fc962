"""Tool approval policies (DESIGN.md, "Operating Palimpsest: approvals"): which server tool calls
wait for an answer (`always_ask`) and which run at once (`always_allow`).

A policy map takes a tool's name, or a prefix pattern ending in `*` (`mcp__*`, `mcp__github__*`,
`*`), to a policy. Where several maps are consulted, the first that names the tool decides; within
one map an exact name wins over a pattern, and a longer pattern over a shorter one. The one format
of `settings.approvals`, `PALIMPSEST_APPROVALS_DEFAULT` and the features' defaults."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from sessions_app.common.canonical import canonical_json

ALWAYS_ALLOW = "always_allow"
ALWAYS_ASK = "always_ask"
POLICIES = (ALWAYS_ALLOW, ALWAYS_ASK)

# A tool name (the providers' rule), or such a name's start followed by `*` (a bare `*`: every tool).
KEY_RE = re.compile(r"^(?:[a-zA-Z0-9_-]{1,64}|[a-zA-Z0-9_-]{0,63}\*)$")
MAX_ENTRIES = 256

# A call's approval state (`ToolCall.approval`): none asked, waiting, answered.
APPROVAL_NONE = ""
APPROVAL_PENDING = "pending"
APPROVAL_APPROVED = "approved"
APPROVAL_DENIED = "denied"
MAX_REASON_CHARS = 2000


class PolicyMapError(ValueError):
    pass


def policy_map_check(value: Any, *, where: str, nulls: bool = False) -> dict[str, str | None]:
    """`value` as a clean policy map; `PolicyMapError` naming the first bad entry. `nulls`: an
    entry may be null (an edit's way to remove a tool's entry)."""
    if not isinstance(value, dict):
        raise PolicyMapError(f"{where} must be an object: tool name or prefix* -> {' or '.join(POLICIES)}")
    if len(value) > MAX_ENTRIES:
        raise PolicyMapError(f"{where} has more than {MAX_ENTRIES} entries")
    clean: dict[str, str | None] = {}
    for key, policy in value.items():
        if not isinstance(key, str) or not KEY_RE.match(key):
            raise PolicyMapError(
                f"{where}: {key!r} is not a tool name (^[a-zA-Z0-9_-]{{1,64}}$) or a prefix ending in *"
            )
        if policy is None and nulls:
            clean[key] = None
            continue
        if policy not in POLICIES:
            allowed = " or ".join(POLICIES) + (" (or null to remove it)" if nulls else "")
            raise PolicyMapError(f"{where}.{key} must be {allowed}")
        clean[key] = policy
    return clean


def policy_in(policies: Mapping[str, str], name: str) -> str | None:
    """The policy `policies` gives the tool `name` (its exact entry, else its longest matching
    pattern), None when it names it not."""
    exact = policies.get(name)
    if exact is not None:
        return exact
    best: tuple[int, str] | None = None
    for key, policy in policies.items():
        if key.endswith("*") and name.startswith(key[:-1]) and (best is None or len(key) > best[0]):
            best = (len(key), policy)
    return best[1] if best is not None else None


def policy_for(name: str, *maps: Mapping[str, str] | None) -> str:
    """The policy of the tool `name`: the first of `maps` that names it decides; else `always_allow`."""
    for policies in maps:
        if policies:
            found = policy_in(policies, name)
            if found is not None:
                return found
    return ALWAYS_ALLOW


def input_sha256(tool_input: Any) -> str:
    """The digest an answer may carry to bind itself to the exact input it saw (canonical JSON)."""
    return hashlib.sha256(canonical_json(tool_input)).hexdigest()
