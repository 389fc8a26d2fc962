"""Scripted-model rules of the agent's knowledge: the offline model learns to keep what it
learns with its agent (listed in `help`).

- `learn: TEXT` → `edit_system_prompt` append (TEXT and a newline);
- `skill: NAME | DESCRIPTION | BODY` → `write_skill`;
- `use skill NAME` → `read_skill`;
- `state KEY=VALUE` → `agent_state` set (VALUE as JSON when it parses as JSON, else the string);
- `state KEY` → `agent_state` get.

In a session without an agent (the tools not offered) the reply says these need an agent. After
the tool call, the built-in results rule reports what the tool returned.
"""

from __future__ import annotations

import json
import re
from typing import Any

from memory_app.knowledge.prompts import AGENT_STATE, EDIT_SYSTEM_PROMPT, READ_SKILL, WRITE_SKILL
from sessions_app.engine.contract import ScriptedInput, ScriptedReply, scripted_rule

_LEARN_RE = re.compile(r"^learn:\s*(.+)$", re.DOTALL | re.IGNORECASE)
_SKILL_RE = re.compile(r"^skill:\s*([^|]*?)\s*\|\s*([^|]*?)\s*\|\s*(.*)$", re.DOTALL | re.IGNORECASE)
_USE_SKILL_RE = re.compile(r"^use skill\s+(\S+)\s*$", re.IGNORECASE)
_STATE_SET_RE = re.compile(r"^state\s+([^=\s][^=]*?)\s*=\s*(.*)$", re.DOTALL | re.IGNORECASE)
_STATE_GET_RE = re.compile(r"^state\s+(\S+)\s*$", re.IGNORECASE)

NEEDS_AGENT_REPLY = (
    "That needs an agent: learned instructions, skills and agent state belong to an agent and outlive "
    "its sessions, and this session has none (or has that tool switched off). Start a session of an "
    "agent (`session.create` with `agent`, or `make chat AGENT=NAME`)."
)


def _words(inp: ScriptedInput) -> str:
    return (inp.user_text or "").strip()


def _call(inp: ScriptedInput, tool: str, text: str, tool_input: dict[str, Any]) -> ScriptedReply:
    if tool not in inp.tool_names:
        return ScriptedReply(text=NEEDS_AGENT_REPLY)
    return ScriptedReply(text=text, tool_uses=[(tool, tool_input)])


@scripted_rule("learn: TEXT: I append the line TEXT to my learned instructions (edit_system_prompt)")
def rule_learn(inp: ScriptedInput) -> ScriptedReply | None:
    match = _LEARN_RE.match(_words(inp))
    if not match:
        return None
    line = match.group(1).strip()
    return _call(
        inp,
        EDIT_SYSTEM_PROMPT,
        "Adding that to my learned instructions.",
        {"operation": "append", "content": line + "\n"},
    )


@scripted_rule("skill: NAME | DESCRIPTION | BODY: I write the skill NAME (write_skill)")
def rule_skill(inp: ScriptedInput) -> ScriptedReply | None:
    match = _SKILL_RE.match(_words(inp))
    if not match:
        return None
    name, description, body = match.groups()
    return _call(
        inp,
        WRITE_SKILL,
        f"Writing the skill {name}.",
        {"name": name, "description": description, "content": body.strip()},
    )


@scripted_rule("use skill NAME: I read the skill NAME in full (read_skill)")
def rule_use_skill(inp: ScriptedInput) -> ScriptedReply | None:
    match = _USE_SKILL_RE.match(_words(inp))
    if not match:
        return None
    return _call(inp, READ_SKILL, f"Reading the skill {match.group(1)}.", {"name": match.group(1)})


def _state_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


@scripted_rule(
    "state KEY=VALUE / state KEY: I set KEY in my agent's state (VALUE as JSON when it is JSON), "
    "or get it (agent_state)"
)
def rule_state(inp: ScriptedInput) -> ScriptedReply | None:
    words = _words(inp)
    match = _STATE_SET_RE.match(words)
    if match:
        key, value = match.group(1), _state_value(match.group(2).strip())
        return _call(
            inp,
            AGENT_STATE,
            f"Setting {key} in my agent's state.",
            {"action": "set", "key": key, "value": value},
        )
    match = _STATE_GET_RE.match(words)
    if match:
        key = match.group(1)
        return _call(inp, AGENT_STATE, f"Reading {key} from my agent's state.", {"action": "get", "key": key})
    return None
