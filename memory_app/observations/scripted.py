"""The scripted model learns offloading (README: "Offloaded observations"):
- `read FILE` calls fs_read with that path;
- `grep PATTERN` calls scratchpad_read in mode grep on the latest offloaded observation in the
  conversation;
- commands chain with ` then ` and run one per step in the same turn, e.g.
  `read logs/big.log then grep ERROR` (with the default `offload.scope` of `turn`, an observation
  can be read only in the turn that made it, so this is how to try both at once);
- after the last command it reports offloaded results and grep matches in plain words.
"""

from __future__ import annotations

import json
import re
from typing import Any

from memory_app.files.tools import FS_READ
from memory_app.observations.content import is_synthetic_observation
from memory_app.observations.tools import SCRATCHPAD_READ
from sessions_app.common.content import content_text
from sessions_app.engine.contract import ScriptedInput, ScriptedReply, scripted_rule

_READ_RE = re.compile(r"^read\s+(\S+)$", re.IGNORECASE)
_GREP_RE = re.compile(r"^grep\s+(.+)$", re.IGNORECASE | re.DOTALL)
_THEN = re.compile(r"\s+then\s+", re.IGNORECASE)


def _json(text: Any) -> Any:
    if not isinstance(text, str):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _commands_and_done(body: dict[str, Any]) -> tuple[list[str], int]:
    """The latest user words split into commands, and how many tool calls were made since."""
    messages = body.get("messages", [])
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        if message.get("role") != "user" or any(b.get("type") == "tool_result" for b in blocks):
            continue
        texts = [b.get("text", "") for b in blocks if b.get("type") == "text"]
        if not texts:
            continue
        done = sum(
            1
            for later in messages[index + 1 :]
            if later.get("role") == "assistant" and isinstance(later.get("content"), list)
            for b in later["content"]
            if b.get("type") == "tool_use"
        )
        return _THEN.split(texts[-1].strip()), done
    return [], 0


def _latest_observation_id(body: dict[str, Any]) -> str | None:
    latest = None
    for message in body.get("messages", []):
        content = message.get("content")
        if message.get("role") != "user" or not isinstance(content, list):
            continue
        for block in content:
            if block.get("type") == "tool_result":
                value = _json(content_text(block.get("content")))
                if is_synthetic_observation(value):
                    latest = value["scratchpad_id"]
    return latest


def _command_reply(inp: ScriptedInput, command: str) -> ScriptedReply:
    read = _READ_RE.match(command)
    if read:
        if FS_READ not in inp.tool_names:
            return ScriptedReply(
                text="fs_read is off: start the server with PALIMPSEST_FS_ROOT set to a folder."
            )
        return ScriptedReply(text=f"Reading {read.group(1)}.", tool_uses=[(FS_READ, {"path": read.group(1)})])
    pattern = _GREP_RE.match(command).group(1)  # type: ignore[union-attr]  # the caller matched it
    observation_id = _latest_observation_id(inp.body)
    if observation_id is None or SCRATCHPAD_READ not in inp.tool_names:
        return ScriptedReply(
            text="There is no offloaded observation I can read in this turn. Try "
            "`read FILE then grep PATTERN` (or set offload.scope to session to grep in a later turn)."
        )
    return ScriptedReply(
        text=f"Searching {observation_id} for {pattern}.",
        tool_uses=[(SCRATCHPAD_READ, {"scratchpad_id": observation_id, "mode": "grep", "pattern": pattern})],
    )


def _report(inp: ScriptedInput) -> ScriptedReply | None:
    lines = []
    for result in inp.tool_results or []:
        value = _json(result["content"])
        if is_synthetic_observation(value):
            lines.append(
                f"{result['name']} returned {value['size_bytes']} bytes ({value['kind']}), saved in the "
                f"scratchpad as {value['scratchpad_id']}. It starts: {value['summary'][:80]!r}"
            )
        elif isinstance(value, dict) and value.get("mode") == "grep" and not result["is_error"]:
            lines.append(f"{value['matches']} matching lines:\n{value['content']}")
    return ScriptedReply(text="\n".join(lines)) if lines else None


@scripted_rule(
    help_line="read FILE, grep PATTERN, or read FILE then grep PATTERN: I read FILE with fs_read (a large "
    "file is offloaded to the scratchpad) and search the latest offloaded observation with scratchpad_read"
)
def rule_read_grep(inp: ScriptedInput) -> ScriptedReply | None:
    commands, done = _commands_and_done(inp.body)
    if not commands or not all(_READ_RE.match(c) or _GREP_RE.match(c) for c in commands):
        return None
    if inp.tool_results and any(r["is_error"] for r in inp.tool_results):
        return None  # the built-in rule reports the error
    if done < len(commands):
        return _command_reply(inp, commands[done])
    return _report(inp)
