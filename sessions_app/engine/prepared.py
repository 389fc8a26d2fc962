"""An epoch's stored messages in request shape (`PreparedHistory`), and the canonical JSON that
requests are hashed and compared in. Split out of `context.py`, which re-exports these names."""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from typing import Any

from sessions_app.common.canonical import canonical_json
from sessions_app.common.estimate import estimate_json_tokens, estimate_text_tokens
from sessions_app.common.request_record import RUN_KEY, message_described
from sessions_app.common.types import StoredMessage
from sessions_app.engine.contract import HistoryView

# What a prepared history keeps per stored message besides its content, in bytes (the
# StoredMessage, the merged message's dict and lists, index entries), as tracemalloc counts it on
# short messages (`bench/bench_memory.py` checks it).
MESSAGE_OVERHEAD_BYTES = 640


def content_nbytes(value: Any) -> int:
    """An estimate of the memory a stored message's decoded content holds in a prepared history,
    its encoded JSON included: CPython's object sizes for dicts, lists and strings, each string
    counted twice (decoded, and again in the encoded bytes; a non-ASCII character as five bytes:
    two (or four) decoded, two to four encoded). One pass over the containers, no
    encoding: cheap next to decoding the message from the database. Iterative, so a deeply
    nested tool input cannot exhaust the stack."""
    total = 0
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            total += 49 + (2 if item.isascii() else 5) * len(item)
        elif isinstance(item, dict):
            total += 232 + 24 * len(item)
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            total += 56 + 8 * len(item)
            pending.extend(item)
        else:
            total += 32
    return total


class PreparedHistory:
    """An epoch's stored messages in request shape, kept up to date as messages are appended.

    Consecutive messages of one role are merged (the API wants alternation); each merged
    message's JSON is encoded once; stored messages that travel unchanged are tracked as runs of
    consecutive positions. So a step's request costs, in Python, only what changed (one or two
    messages) plus C-speed copies, not a pass over the whole history.

    `nbytes` is a running estimate of the memory the history holds (`content_nbytes` of each
    stored message plus MESSAGE_OVERHEAD_BYTES), kept as messages are appended, for the byte
    budget of the per-process history cache (`history.py`).

    Masks (compaction's cheap tier) replace a tool result's content by a short placeholder in
    every request, by `tool_use_id`; the stored message is untouched. Masking re-encodes only
    the message that holds the result, which then travels whole in recorded requests.

    A view (`HistoryView`, e.g. finished tasks) also leaves tool calls out and replaces results
    (a replacement wins over a mask). A stored message left empty is left out, so the messages
    around it merge and roles still alternate. Changing the view (`view_set`) rebuilds the merged
    list once from the stored messages, keeping the encoded bytes of every merged message that
    did not change; messages the view altered travel whole in recorded requests.
    """

    def __init__(
        self,
        stored: Sequence[StoredMessage] = (),
        *,
        epoch: int = 0,
        masks: Mapping[str, str] | None = None,
        view: HistoryView | None = None,
    ) -> None:
        self.epoch = epoch
        self.stored: list[StoredMessage] = []
        # tool_use_id → placeholder shown instead of that result; and the tokens each saved.
        self.masks: dict[str, str] = dict(masks or {})
        # The result the latest masking batch began at (the oldest unmasked one then): the
        # request right after the batch keeps a cache breakpoint before it, where the earlier
        # requests had theirs, so that it reads the unchanged prefix from the cache.
        self.mask_anchor: str | None = None
        # The position the history summarized next ends before (set with the warning step of a
        # compaction of the history): the request keeps a cache breakpoint on the block before
        # it, where the summary call in the session's layout reads its prefix from the cache.
        self.summary_anchor: int | None = None
        self.view = view or HistoryView()
        self.result_at: dict[str, int] = {}  # tool_use_id → stored index of its tool_result
        self.tool_names: dict[str, str] = {}  # tool_use_id → the tool's name
        self.nbytes = 0
        self._reset()
        for message in stored:
            self.append(message)

    def _reset(self) -> None:
        self.messages: list[dict] = []
        self.single: list[bool] = []  # whether messages[i] is exactly one unaltered stored message
        self.encoded: list[bytes | None] = []
        # The indices whose `encoded` is None (to encode before the next request): a request
        # looks at these, not at ten thousand entries to find the few.
        self.unencoded: set[int] = set()
        # Runs of single stored messages with consecutive positions: [start_index, end_index
        # (exclusive), first_position].
        self.runs: list[list[int]] = []
        self.token_total = 0
        self.mask_savings: dict[str, int] = {}
        # Tokens the view saved (left-out calls, replaced results), by stored index.
        self.view_savings: dict[int, int] = {}
        self.members: list[list[int]] = []  # stored indices merged into messages[i]
        self.owner: list[int] = []  # stored index → index in messages (-1: left out)
        self.shown_length: list[int] = []  # stored index → how many of its blocks are shown

    def __len__(self) -> int:
        return len(self.stored)

    @property
    def last_position(self) -> int:
        return self.stored[-1].position if self.stored else -1

    @property
    def collapse_savings(self) -> int:
        """The tokens the view (e.g. finished tasks) keeps out of every request."""
        return sum(self.view_savings.values())

    def _masked(self, block: dict) -> dict:
        if block.get("type") != "tool_result":
            return block
        tool_use_id = block.get("tool_use_id")
        text = self.view.replacements.get(tool_use_id or "") or self.masks.get(tool_use_id or "")
        if text is None:
            return block
        out = {"type": "tool_result", "tool_use_id": block["tool_use_id"], "content": text}
        if block.get("is_error"):
            out["is_error"] = True
        return out

    def _saving(self, block: dict) -> int:
        placeholder = self.masks[block["tool_use_id"]]
        return max(0, estimate_json_tokens(block.get("content", "")) - estimate_text_tokens(placeholder))

    def _hidden(self, block: dict) -> bool:
        kind = block.get("type")
        if kind == "tool_use":
            return block.get("id") in self.view.hidden
        return kind == "tool_result" and block.get("tool_use_id") in self.view.hidden

    def _shown(self, stored_index: int, message: StoredMessage) -> tuple[list[dict], bool]:
        """The blocks of a stored message as requests show them, and whether any differs."""
        content = list(message.content)
        altered = False
        view_saving = 0
        for block in content:
            if block.get("type") != "tool_result":
                continue
            tool_use_id = block.get("tool_use_id", "")
            if tool_use_id in self.masks and tool_use_id not in self.view.hidden:
                if tool_use_id not in self.view.replacements:
                    saving = self._saving(block)
                    self.mask_savings[tool_use_id] = saving
                    self.token_total -= saving
                altered = True
            if tool_use_id in self.view.replacements and tool_use_id not in self.view.hidden:
                view_saving += estimate_json_tokens(block.get("content", "")) - estimate_text_tokens(
                    self.view.replacements[tool_use_id]
                )
                altered = True
        if self.view.hidden:
            kept = [b for b in content if not self._hidden(b)]
            if len(kept) != len(content):
                view_saving += sum(estimate_json_tokens(b) for b in content if self._hidden(b))
                content, altered = kept, True
        view_saving = max(0, min(view_saving, message.token_estimate))
        if view_saving:
            self.view_savings[stored_index] = view_saving
            self.token_total -= view_saving
        if altered:
            content = [self._masked(b) for b in content]
        return content, altered

    def append(self, message: StoredMessage) -> None:
        stored_index = len(self.stored)
        self.stored.append(message)
        self.nbytes += MESSAGE_OVERHEAD_BYTES + content_nbytes(message.content)
        for block in message.content:
            if block.get("type") == "tool_use":
                self.tool_names[block.get("id", "")] = block.get("name", "tool")
            elif block.get("type") == "tool_result":
                self.result_at[block.get("tool_use_id", "")] = stored_index
        self._place(stored_index, message)

    def _place(self, stored_index: int, message: StoredMessage) -> None:
        """Put stored message `stored_index` (the newest placed) into the merged messages."""
        self.token_total += message.token_estimate
        content, altered = self._shown(stored_index, message)
        self.shown_length.append(len(content))
        if not content and message.content:
            self.owner.append(-1)  # left out whole by the view
            return
        if self.messages and self.messages[-1]["role"] == message.role:
            last = len(self.messages) - 1
            self.messages[last] = {"role": message.role, "content": self.messages[last]["content"] + content}
            self.encoded[last] = None
            self.unencoded.add(last)
            self.members[last].append(stored_index)
            self.owner.append(last)
            if self.single[last]:
                self._unrun(last)
            return
        index = len(self.messages)
        self.messages.append({"role": message.role, "content": content})
        self.single.append(not altered)
        self.encoded.append(None)
        self.unencoded.add(index)
        self.members.append([stored_index])
        self.owner.append(index)
        if altered:
            return
        if (
            self.runs
            and self.runs[-1][1] == index
            and self.runs[-1][2] + index - self.runs[-1][0] == message.position
        ):
            self.runs[-1][1] += 1
        else:
            self.runs.append([index, index + 1, message.position])

    def view_set(self, view: HistoryView) -> bool:
        """Show the history through `view` from now on (False: it was already). One pass over
        the stored messages; merged messages whose members and blocks are unchanged keep their
        encoded bytes, so nothing unchanged is encoded again."""
        if view == self.view:
            return False
        previous = {
            tuple(members): (message, encoded)
            for members, message, encoded in zip(self.members, self.messages, self.encoded, strict=True)
        }
        self.view = view
        self._reset()
        for stored_index, message in enumerate(self.stored):
            self._place(stored_index, message)
        for index, members in enumerate(self.members):
            before = previous.get(tuple(members))
            if before is not None and before[0] == self.messages[index] and before[1] is not None:
                self.encoded[index] = before[1]
                self.unencoded.discard(index)
        return True

    def _unrun(self, index: int) -> None:
        """messages[index] no longer travels as one unaltered stored message: take it out of its run."""
        self.single[index] = False
        for number, (start, end, first) in enumerate(self.runs):
            if start <= index < end:
                pieces = []
                if start < index:
                    pieces.append([start, index, first])
                if index + 1 < end:
                    pieces.append([index + 1, end, first + index + 1 - start])
                self.runs[number : number + 1] = pieces
                return

    def tool_results(self) -> list[tuple[str, int]]:
        """(tool_use_id, position of its stored message) of every tool result, oldest first."""
        return sorted(
            ((i, self.stored[s].position) for i, s in self.result_at.items()), key=lambda item: item[1]
        )

    def first_unmasked_result(self, keep_recent: int) -> str | None:
        """The oldest tool result shown whole that masking may still take (not among the newest
        `keep_recent`): where the next masking batch will first change the prefix."""
        results = self.tool_results()
        for tool_use_id, _ in results[: max(0, len(results) - keep_recent)]:
            if (
                tool_use_id not in self.masks
                and tool_use_id not in self.view.hidden
                and tool_use_id not in self.view.replacements
            ):
                return tool_use_id
        return None

    def mask_saving_estimate(self, tool_use_ids: list[str], placeholder_tokens: int) -> int:
        """About the tokens masking `tool_use_ids` would save (each result's estimate less a
        placeholder's), without masking them."""
        saving = 0
        for tool_use_id in tool_use_ids:
            if tool_use_id in self.masks or tool_use_id in self.view.hidden:
                continue
            saving += max(0, estimate_json_tokens(self.result_content(tool_use_id)) - placeholder_tokens)
        return saving

    def block_before_result(self, tool_use_id: str) -> tuple[int, int] | None:
        """(merged message index, block index) of the block shown just before the result of
        `tool_use_id`: a cache breakpoint there keeps the prefix before the result readable
        when the result is masked. None when it is not shown or nothing comes before it."""
        stored_index = self.result_at.get(tool_use_id)
        if stored_index is None:
            return None
        index = self.owner[stored_index]
        if index < 0:
            return None
        content = self.messages[index]["content"]
        at = next(
            (
                i
                for i, b in enumerate(content)
                if b.get("type") == "tool_result" and b.get("tool_use_id") == tool_use_id
            ),
            None,
        )
        if at is None:
            return None
        if at > 0:
            return index, at - 1
        if index == 0 or not self.messages[index - 1]["content"]:
            return None
        return index - 1, len(self.messages[index - 1]["content"]) - 1

    def block_before_position(self, position: int) -> tuple[int, int] | None:
        """(merged message index, block index) of the last block shown of the stored messages
        before `position`; None when none is shown."""
        for stored_index in range(len(self.stored) - 1, -1, -1):
            if self.stored[stored_index].position >= position:
                continue
            index = self.owner[stored_index]
            if index < 0 or not self.shown_length[stored_index]:
                continue
            members = self.members[index]
            upto = members.index(stored_index)
            block = sum(self.shown_length[m] for m in members[: upto + 1] if self.owner[m] == index) - 1
            return index, block
        return None

    def stored_index_at(self, position: int) -> int | None:
        """The stored index of the message at `position` (None: no such message here)."""
        at = bisect.bisect_left(self.stored, position, key=lambda message: message.position)
        return at if at < len(self.stored) and self.stored[at].position == position else None

    def insertion_point(self, stored_index: int) -> tuple[int, int] | None:
        """Where blocks shown with stored message `stored_index` go: (merged message index,
        block index) after its tool results and before its other blocks (the API wants
        tool_result blocks first in a user message). None when the view leaves it out."""
        index = self.owner[stored_index]
        if index < 0:
            return None
        members = self.members[index]
        at = sum(
            self.shown_length[m] for m in members[: members.index(stored_index)] if self.owner[m] == index
        )
        end = at + self.shown_length[stored_index]
        content = self.messages[index]["content"]
        while at < end and content[at].get("type") == "tool_result":
            at += 1
        return index, at

    def result_content(self, tool_use_id: str) -> Any:
        """The stored content of a tool result (what a mask hides)."""
        for block in self.stored[self.result_at[tool_use_id]].content:
            if block.get("type") == "tool_result" and block.get("tool_use_id") == tool_use_id:
                return block.get("content", "")
        raise KeyError(tool_use_id)

    def mask(self, tool_use_id: str, placeholder: str) -> int:
        """Show `placeholder` instead of the result of `tool_use_id` from now on; the tokens saved."""
        stored_index = self.result_at[tool_use_id]
        if tool_use_id in self.masks:
            return 0
        self.masks[tool_use_id] = placeholder
        if tool_use_id in self.view.hidden or tool_use_id in self.view.replacements:
            return 0  # the view already shows something else there
        block = next(
            b
            for b in self.stored[stored_index].content
            if b.get("type") == "tool_result" and b.get("tool_use_id") == tool_use_id
        )
        saving = self._saving(block)
        self.mask_savings[tool_use_id] = saving
        self.token_total -= saving
        index = self.owner[stored_index]
        content: list[dict] = []
        for member in self.members[index]:
            content += [self._masked(b) for b in self.stored[member].content if not self._hidden(b)]
        self.messages[index] = {"role": self.messages[index]["role"], "content": content}
        self.encoded[index] = None
        self.unencoded.add(index)
        if self.single[index]:
            self._unrun(index)
        return saving

    def encoded_message(self, index: int) -> bytes:
        value = self.encoded[index]
        if value is None:
            value = self.encoded[index] = canonical_json(self.messages[index])
            self.unencoded.discard(index)
        return value

    def encoded_all(self) -> list[bytes]:
        """A copy of every merged message's canonical JSON, in order (each encoded once)."""
        for index in self.unencoded:
            self.encoded[index] = canonical_json(self.messages[index])
        self.unencoded.clear()
        return list(self.encoded)  # type: ignore[arg-type]  # no None is left

    def record(self, sent: list[dict], changed: set[int]) -> list[dict]:
        """`sent` with unchanged stored messages replaced by `{"$messages": [first, last]}` runs,
        and a stored message sent with blocks added or marked by `{"$message": position, ...}`
        (`common.request_record`)."""
        out: list[dict] = []
        index = 0
        for start, end, first in self.runs:
            out.extend(sent[index:start])  # merged or masked messages between runs travel whole
            cursor = start
            for cut in sorted(c for c in changed if start <= c < end):
                if cursor < cut:
                    out.append({RUN_KEY: [first + cursor - start, first + cut - 1 - start]})
                position = first + cut - start
                # A message of this call only (a negative position: no row holds it) as sent.
                out.append(
                    message_described(sent[cut], self.messages[cut], position) if position >= 0 else sent[cut]
                )
                cursor = cut + 1
            if cursor < end:
                out.append({RUN_KEY: [first + cursor - start, first + end - 1 - start]})
            index = end
        out.extend(sent[index:])
        return out
