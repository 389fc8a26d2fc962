"""Scripted-model rules of authored tools (listed in `help`):

- `define tool NAME: CODE` → `define_tool` with CODE (the rest of the message, lines included), a
  description saying who wrote it and the permissive schema `{"type": "object"}`;
- `define tool NAME (DESCRIPTION) {SCHEMA}: CODE` gives the description and the JSON schema;
- `remove tool NAME` → `remove_tool`.
An authored tool is called with the built-in rule `tool NAME {json}`. Where the tools are not
offered, the reply says why.
"""

from __future__ import annotations

import json
import re

from memory_app.authored_tools.prompts import DEFINE_TOOL, REMOVE_TOOL
from sessions_app.engine.contract import ScriptedInput, ScriptedReply, scripted_rule

_DEFINE_RE = re.compile(r"^define tool\s+([^\s(:{]+)\s*(?:\((?P<description>[^)]*)\))?\s*", re.IGNORECASE)
_REMOVE_RE = re.compile(r"^remove tool\s+(\S+)\s*$", re.IGNORECASE)
DEFAULT_DESCRIPTION = "A tool I defined for myself: {name}."
PERMISSIVE_SCHEMA = {"type": "object"}
NOT_OFFERED_REPLY = (
    "I cannot define tools here: that needs a session of an agent, the code sandbox on and "
    "knowledge.tool_authoring."
)


def _words(inp: ScriptedInput) -> str:
    return (inp.user_text or "").strip()


def _definition(words: str) -> dict | str | None:
    """The `define_tool` input the words give, a reply saying what is wrong, or None."""
    match = _DEFINE_RE.match(words)
    if not match:
        return None
    name, rest = match.group(1), words[match.end() :]
    schema: object = PERMISSIVE_SCHEMA
    if rest.startswith("{"):
        try:
            schema, end = json.JSONDecoder().raw_decode(rest)
        except json.JSONDecodeError as exc:
            return f"That schema is not JSON ({exc.msg})."
        rest = rest[end:].lstrip()
    if not rest.startswith(":"):
        return None
    return {
        "name": name,
        "description": (match.group("description") or "").strip() or DEFAULT_DESCRIPTION.format(name=name),
        "input_schema": schema,
        "code": rest[1:].lstrip("\n").lstrip(" ") if rest[1:].strip() else "",
    }


@scripted_rule(
    "define tool NAME [(DESCRIPTION)] [{SCHEMA}]: CODE: I define the tool NAME running CODE, "
    "which defines run(args, session) (define_tool)"
)
def rule_define_tool(inp: ScriptedInput) -> ScriptedReply | None:
    found = _definition(_words(inp))
    if found is None:
        return None
    if DEFINE_TOOL not in inp.tool_names:
        return ScriptedReply(text=NOT_OFFERED_REPLY)
    if isinstance(found, str):
        return ScriptedReply(text=found)
    return ScriptedReply(text=f"Defining the tool {found['name']}.", tool_uses=[(DEFINE_TOOL, found)])


@scripted_rule("remove tool NAME: I remove the tool NAME I defined (remove_tool)")
def rule_remove_tool(inp: ScriptedInput) -> ScriptedReply | None:
    match = _REMOVE_RE.match(_words(inp))
    if not match:
        return None
    if REMOVE_TOOL not in inp.tool_names:
        return ScriptedReply(text=NOT_OFFERED_REPLY)
    return ScriptedReply(
        text=f"Removing the tool {match.group(1)}.", tool_uses=[(REMOVE_TOOL, {"name": match.group(1)})]
    )
