"""The scripted model: deterministic, offline, and talkable-to without an API key.

It reads the request the way a model would (the latest user text, or the tool results it is
given; words sent after a turn that ended with tool results are a new message) and answers by
rules, first match wins: the rules it is given (the features' rules, in feature order;
`features.FeatureSet.scripted_rules`), then its built-in ones (the README lists them for
newcomers):
- `help` lists what it understands;
- `echo TEXT` answers TEXT;
- `tool NAME {json}` calls tool NAME with that JSON input (a client or a server tool);
- after tool results it reports each result;
- anything else is answered with `You said: TEXT`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any

from sessions_app.common.content import content_text
from sessions_app.common.estimate import estimate_json_tokens
from sessions_app.engine.contract import ScriptedInput, ScriptedReply, ScriptedRule
from sessions_app.engine.providers.base import ModelResponse, TextCallback, Usage

RESULT_PREVIEW_CHARS = 300


HELP_LINES: tuple[str, ...] = (
    "help: this list",
    "echo TEXT: I answer TEXT",
    'tool NAME {"json": "input"}: I call the tool NAME with that input',
)


def parse_input(body: dict[str, Any], context_openings: Sequence[str] = ()) -> ScriptedInput:
    """What the request asks: the user's words, or else the tool results to report.

    A turn that ends after its tool calls ran (cancelled, out of steps, a tool that ends it)
    leaves their results last in the history, so the next user message is merged after them in
    one user message. Its words are what is answered: the results belong to a turn that is over.
    The blocks the features put before the latest user message for this call
    (`FeatureSet.context_openings` tells them by how they begin) are no words: in the middle of a
    turn they follow the results alone."""
    messages: list[dict[str, Any]] = body.get("messages", [])
    last: dict[str, Any] = messages[-1] if messages else {"role": "user", "content": []}
    raw_content: Any = last.get("content", [])
    content: list[dict] = (
        [{"type": "text", "text": raw_content}] if isinstance(raw_content, str) else list(raw_content)
    )
    names_by_id: dict[str, str] = {}
    for message in messages:
        if message.get("role") == "assistant" and isinstance(message.get("content"), list):
            for block in message["content"]:
                if block.get("type") == "tool_use":
                    names_by_id[block["id"]] = block["name"]
    results = [
        {
            "name": names_by_id.get(b.get("tool_use_id", ""), "tool"),
            "content": content_text(b.get("content"), sep="\n"),
            "is_error": bool(b.get("is_error")),
        }
        for b in content
        if b.get("type") == "tool_result"
    ]
    openings = tuple(context_openings)
    texts = [b.get("text", "") for b in content if b.get("type") == "text"]
    words = [text for text in texts if not text.startswith(openings)]
    system = body.get("system", "")
    return ScriptedInput(
        body=body,
        user_text=words[-1] if words else None,
        tool_results=results if results and not words else None,
        tool_names=[t["name"] for t in body.get("tools", [])],
        system_text=system if isinstance(system, str) else content_text(system),
    )


def _help(inp: ScriptedInput, rules: Sequence[ScriptedRule]) -> ScriptedReply | None:
    if inp.user_text is not None and inp.user_text.strip().lower() == "help":
        lines = [*HELP_LINES, *(line for r in rules if (line := getattr(r, "help_line", None)))]
        return ScriptedReply(text="I am the scripted model. I understand:\n- " + "\n- ".join(lines))
    return None


def _rule_echo(inp: ScriptedInput) -> ScriptedReply | None:
    if inp.user_text is not None and inp.user_text.lower().startswith("echo "):
        return ScriptedReply(text=inp.user_text[5:])
    return None


_TOOL_RE = re.compile(r"^tool\s+([a-zA-Z0-9_-]{1,64})\s*(.*)$", re.DOTALL | re.IGNORECASE)


def _rule_tool(inp: ScriptedInput) -> ScriptedReply | None:
    if inp.user_text is None:
        return None
    match = _TOOL_RE.match(inp.user_text.strip())
    if not match:
        return None
    name, raw = match.group(1), match.group(2).strip() or "{}"
    if name not in inp.tool_names:
        return ScriptedReply(
            text=f"I have no tool named {name}. My tools: {', '.join(inp.tool_names) or 'none'}."
        )
    try:
        tool_input = json.loads(raw)
    except json.JSONDecodeError as exc:
        return ScriptedReply(text=f"That tool input is not JSON ({exc.msg}).")
    if not isinstance(tool_input, dict):
        return ScriptedReply(text="A tool input must be a JSON object.")
    return ScriptedReply(text=f"Calling {name}.", tool_uses=[(name, tool_input)])


def _rule_results(inp: ScriptedInput) -> ScriptedReply | None:
    if not inp.tool_results:
        return None
    lines = []
    for result in inp.tool_results:
        verb = "failed" if result["is_error"] else "returned"
        preview = result["content"]
        if len(preview) > RESULT_PREVIEW_CHARS:
            preview = preview[:RESULT_PREVIEW_CHARS] + "…"
        lines.append(f"{result['name']} {verb}: {preview}")
    return ScriptedReply(text="\n".join(lines))


def _rule_default(inp: ScriptedInput) -> ScriptedReply:
    return ScriptedReply(text=f"You said: {inp.user_text or ''}")


def scripted_answer(
    body: dict[str, Any], rules: Sequence[ScriptedRule] = (), context_openings: Sequence[str] = ()
) -> ScriptedReply:
    inp = parse_input(body, context_openings)
    inp.answer_without = lambda skipped: scripted_answer(
        body, [r for r in rules if r is not skipped], context_openings
    )
    for rule in rules:
        reply = rule(inp)
        if reply is not None:
            return reply
    for builtin in (lambda i: _help(i, rules), _rule_echo, _rule_tool, _rule_results):
        reply = builtin(inp)
        if reply is not None:
            return reply
    return _rule_default(inp)


# Streamed pieces gather whole words up to about this many characters: a long answer streams
# in a second or two at `make run`'s delay per piece, yet still visibly word by word.
STREAM_CHUNK_CHARS = 48


def text_stream_chunks(text: str, *, size: int = STREAM_CHUNK_CHARS) -> list[str]:
    """`text` in pieces of whole words (with their following spaces), each at least `size`
    characters except the last, and over it by at most one word."""
    pieces: list[str] = []
    current = ""
    for word in re.findall(r"\S+\s*|\s+", text):
        current += word
        if len(current) >= size:
            pieces.append(current)
            current = ""
    if current:
        pieces.append(current)
    return pieces


class ScriptedProvider:
    name = "scripted"

    def __init__(
        self,
        *,
        rules: Sequence[ScriptedRule] = (),
        context_openings: Sequence[str] = (),
        chunk_delay_seconds: float = 0.0,
    ) -> None:
        self.rules = tuple(rules)
        self.context_openings = tuple(context_openings)
        self.chunk_delay_seconds = chunk_delay_seconds

    async def complete(
        self, body: dict[str, Any], *, on_text: TextCallback | None = None, encoded: bytes | None = None
    ) -> ModelResponse:
        reply = scripted_answer(body, self.rules, self.context_openings)
        content: list[dict] = []
        if reply.text:
            content.append({"type": "text", "text": reply.text})
            if on_text is not None:
                for chunk in text_stream_chunks(reply.text):
                    if self.chunk_delay_seconds:
                        await asyncio.sleep(self.chunk_delay_seconds)
                    await on_text(chunk)
        # Ids are derived from the request, so they are deterministic yet unique in a session
        # (each request carries a longer history than the one before).
        digest = hashlib.sha256(json.dumps(body.get("messages", []), sort_keys=True).encode()).hexdigest()
        for index, (name, tool_input) in enumerate(reply.tool_uses):
            content.append(
                {
                    "type": "tool_use",
                    "id": f"toolu_s{digest[:20]}{index:02d}",
                    "name": name,
                    "input": tool_input,
                }
            )
        prompt = {k: body[k] for k in ("system", "tools", "messages") if k in body}
        return ModelResponse(
            content=content,
            stop_reason="tool_use" if reply.tool_uses else "end_turn",
            usage=Usage(
                input_tokens=estimate_json_tokens(prompt), output_tokens=estimate_json_tokens(content)
            ),
            raw={"model": body.get("model", "scripted")},
        )
