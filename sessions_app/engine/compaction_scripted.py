"""The scripted model's rules for compaction (part of the engine's core feature): it summarizes,
and it answers the pre-compaction warning.

Its summary is deterministic: the user's requests in order and the assistant's last reply, read
back from the transcript the summary call sends (`[user] …` / `[assistant] …` lines). Combining
partial summaries joins them in order.
"""

from __future__ import annotations

from sessions_app.engine.prompts import (
    COMPACTION_COMBINE_INSTRUCTION,
    COMPACTION_SUMMARY_SYSTEM_PROMPT,
    PRE_COMPACTION_WARNING,
)
from sessions_app.engine.providers.scripted import ScriptedInput, ScriptedReply, scripted_rule

PREVIEW_CHARS = 200


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= PREVIEW_CHARS else text[:PREVIEW_CHARS] + "…"


@scripted_rule()
def summarize(inp: ScriptedInput) -> ScriptedReply | None:
    if inp.system_text != COMPACTION_SUMMARY_SYSTEM_PROMPT or inp.user_text is None:
        return None
    if inp.user_text.endswith(COMPACTION_COMBINE_INSTRUCTION):
        parts = [p.split("\n", 1)[1] for p in inp.user_text.split("\n\n") if p.startswith("Summary of part ")]
        return ScriptedReply(text=" | ".join(parts))
    requests = []
    last_reply = ""
    for line in inp.user_text.splitlines():
        if line.startswith("[user] ") and not line[7:].startswith(PRE_COMPACTION_WARNING[:20]):
            requests.append(_short(line[7:]))
        elif line.startswith("[assistant] "):
            last_reply = _short(line[12:])
    text = "User requests: " + ("; ".join(requests) if requests else "none") + "."
    if last_reply:
        text += f" Last assistant reply: {last_reply}"
    return ScriptedReply(text=text)


@scripted_rule()
def answer_the_compaction_warning(inp: ScriptedInput) -> ScriptedReply | None:
    # Seed 000: "In many cases, the agent will respond with 'Notepad is up to date'".
    if inp.user_text is not None and inp.user_text == PRE_COMPACTION_WARNING:
        return ScriptedReply(text="Notepad is up to date.")
    return None
