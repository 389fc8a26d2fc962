"""Creating sub-sessions (seed 000's `spawn_session` and `fork_session`; DESIGN.md's contract).

A child is a full session (history, notepad, scratchpad, compaction, events) with the parent's
owner, model, system prompt, context window, client tools and settings, one level deeper in the
parent's tree. What it starts with:
- spawn: an empty history and scratchpad; an empty notepad, or a copy of the parent's with
  `copy_notepad`;
- fork: a copy of the parent's current epoch as the model sees it, up to the parent's last
  completed step (`fork_plan`), and copies of the parent's notepad and scratchpad. The copy is
  decided from the messages' outlines and made inside the database (no message's content passes
  through Python), and refused, before anything is written, over `fork_max_tokens`.
After creation parent and child memory are independent. The child, its copies and the
`session.spawned` event on the parent are written in one transaction.

How many children there may be (issue 31), each bound the smaller of a session setting and the
service's ceiling (`subsession_bound`):
- per step: a step's first `subsessions.max_per_step` spawn/fork calls may start a child, later
  ones are refused (`tools`, from the step's stored message);
- per tree: at most `subsessions.max_per_tree` (the root's setting) sessions below one root,
  counted under the root's row lock;
- per client: at most `subsessions.max_per_client` (the root's setting) sub-sessions of one
  token that run a turn or were created in the last CLIENT_RECENT_SECONDS, counted under the
  token's row lock; and each child counts against the token's sessions-per-minute quota
  (`sessions_app.services.session_quota_check`).
A refusal raises `SubsessionRefused` with a message for the model, before anything is written.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings as django_settings
from django.db import transaction
from django.utils import timezone

from memory_app.notepad import services as notepad_services
from memory_app.scratchpad import services as scratchpad_services
from memory_app.subsessions import prompts
from memory_app.tasks import services as tasks_services
from sessions_app import services
from sessions_app.authors import AGENT_AUTHOR
from sessions_app.budgets import budget_not_inherited
from sessions_app.common.estimate import estimate_json_tokens
from sessions_app.engine.contract import SessionSnapshot
from sessions_app.message_content import RESOLVED, messages_with_content
from sessions_app.models import AgentSession, Message, MessageRole, Turn
from sessions_app.selectors import MessageOutline, message_outlines
from sessions_app.services import event_emit

MODE_SPAWN = "spawn"
MODE_FORK = "fork"
# A child's title when the call names none: the start of its task.
TITLE_FROM_TASK_CHARS = 80
TITLE_MAX_CHARS = AgentSession._meta.get_field("title").max_length or 200
# Copied memory is the parent agent's own writing, so its author is the agent (PROTOCOL.md's
# `notepad.updated` / `scratchpad.updated` authors are unchanged).
COPY_AUTHOR = AGENT_AUTHOR


# The per-client bound counts the token's sub-sessions created this recently (with those that
# run a turn): a child is created a moment before its turn begins.
CLIENT_RECENT_SECONDS = 60
# Each fan-out setting's service-wide ceiling (config/settings.py).
CEILINGS = {
    "max_concurrent": "PALIMPSEST_SUBSESSIONS_MAX_CONCURRENT",
    "max_per_step": "PALIMPSEST_SUBSESSIONS_MAX_PER_STEP",
    "max_per_tree": "PALIMPSEST_SUBSESSIONS_MAX_PER_TREE",
    "max_per_client": "PALIMPSEST_SUBSESSIONS_MAX_PER_CLIENT",
}


class SubsessionRefused(Exception):
    """The session may not start a sub-session now; the message is written for the model."""


@dataclass(frozen=True)
class Bound:
    """A fan-out bound as it applies: `value`, and `why` (which setting or ceiling sets it, for
    the model's error)."""

    value: int
    why: str


def subsession_bound(session: SessionSnapshot, key: str) -> Bound:
    """The bound `subsessions.<key>` (one of CEILINGS) sets for `session`: the smaller of the
    setting and the service's ceiling, which a session's settings cannot raise."""
    value = int(session.setting("subsessions", key))
    ceiling_name = CEILINGS[key]
    ceiling = int(getattr(django_settings, ceiling_name))
    if value <= ceiling:
        return Bound(value, prompts.BOUND_BY_SETTING.format(key=key, value=value))
    why = prompts.BOUND_BY_CEILING.format(ceiling_name=ceiling_name, ceiling=ceiling, key=key, value=value)
    return Bound(ceiling, why)


def subsession_step_check(session: SessionSnapshot, *, call_number: int) -> None:
    """Raise `SubsessionRefused` where the step's `call_number`-th spawn/fork call (from 1) is
    over `subsessions.max_per_step`."""
    bound = subsession_bound(session, "max_per_step")
    if call_number > bound.value:
        raise SubsessionRefused(
            prompts.STEP_LIMIT.format(number=call_number, limit=bound.value, why=bound.why)
        )


def _tree_check(root: SessionSnapshot) -> None:
    """Under the root's row lock: refuse where its tree holds `max_per_tree` sub-sessions."""
    bound = subsession_bound(root, "max_per_tree")
    count = AgentSession.objects.filter(root_session_id=root.id).count()
    if count >= bound.value:
        raise SubsessionRefused(prompts.TREE_LIMIT.format(count=count, why=bound.why))


def _client_check(root: SessionSnapshot, *, owner_id: int | None) -> None:
    """Under the token's row lock: refuse where it is over its sessions-per-minute quota or has
    `max_per_client` sub-sessions running a turn or created in the last CLIENT_RECENT_SECONDS.
    A tree no token owns (an operator's) has no client bound."""
    if owner_id is None:
        return
    try:
        services.session_quota_check(owner_id=owner_id)
    except services.SessionQuotaExceeded as exc:
        raise SubsessionRefused(prompts.QUOTA_LIMIT.format(limit=exc.limit)) from exc
    bound = subsession_bound(root, "max_per_client")
    children = AgentSession.objects.filter(owner_id=owner_id, depth__gte=1)
    since = timezone.now() - timedelta(seconds=CLIENT_RECENT_SECONDS)
    count = (
        children.filter(current_turn_id__isnull=False).count()
        + children.filter(current_turn_id__isnull=True, created_at__gt=since).count()
    )
    if count >= bound.value:
        raise SubsessionRefused(prompts.CLIENT_LIMIT.format(count=count, why=bound.why))


def subsession_limits_check(session: SessionSnapshot) -> None:
    """Raise `SubsessionRefused` where `session` may not start a child (switched off, or at
    `subsessions.max_depth`)."""
    if not session.setting("subsessions", "enabled"):
        raise SubsessionRefused(prompts.DISABLED)
    max_depth = session.setting("subsessions", "max_depth")
    if session.depth >= max_depth:
        raise SubsessionRefused(prompts.DEPTH_LIMIT.format(depth=session.depth, max_depth=max_depth))


def _title(title: str | None, task: str) -> str:
    if title and title.strip():
        return title.strip()[:TITLE_MAX_CHARS]
    first_line = task.strip().splitlines()[0] if task.strip() else ""
    if len(first_line) > TITLE_FROM_TASK_CHARS:
        return first_line[: TITLE_FROM_TASK_CHARS - 1] + "…"
    return first_line


def subsession_create(
    *,
    parent_id: uuid.UUID,
    tool_use_id: str,
    mode: str,
    task: str,
    title: str | None = None,
    copy_notepad: bool = False,
    settings_defaults: Mapping[str, Any],
) -> AgentSession:
    """Create the child of `parent_id` that its call `tool_use_id` asks for, and announce it.

    Raises `SubsessionRefused` (nothing written) where the parent may not start children, or
    its tree or its token is at a bound (the module's docstring). The token's row is locked
    first (`services.agent_token_lock` says why), then the root's, then the parent's (the order
    `session_tree_delete` locks a tree in): concurrent calls anywhere in the tree, or of the
    token, are counted one after another. The child's
    `task` is not stored here: it becomes the child's first user message when its turn begins.
    Emits `session.spawned` (`child_session_id`, `mode`, `tool_use_id`, `title`) on the parent.
    Returns the child.
    """
    if mode not in (MODE_SPAWN, MODE_FORK):
        raise ValueError(f"unknown sub-session mode {mode!r}")
    # Set once at creation, so read before the locks: the token's first, then the root's.
    owner_id, root_id = AgentSession.objects.values_list("owner_id", "root_session_id").get(pk=parent_id)
    root_id = root_id or parent_id
    # A full tree stays full (a child keeps its place after it ends): refused on a plain read,
    # without the write locks, so that a model's storm of calls past the bound does not queue
    # every other session's writes behind its own (SQLite has one writer). Under the bound, the
    # count is made again under the locks below.
    _tree_check(
        SessionSnapshot.from_session(AgentSession.objects.get(pk=root_id), defaults=settings_defaults)
    )
    with transaction.atomic():
        services.agent_token_lock(owner_id=owner_id)
        root = AgentSession.objects.select_for_update().get(pk=root_id)
        parent = root if root_id == parent_id else AgentSession.objects.select_for_update().get(pk=parent_id)
        snapshot = SessionSnapshot.from_session(parent, defaults=settings_defaults)
        subsession_limits_check(snapshot)
        root_snapshot = SessionSnapshot.from_session(root, defaults=settings_defaults)
        _tree_check(root_snapshot)
        _client_check(root_snapshot, owner_id=parent.owner_id)
        plan = None
        if mode == MODE_FORK:
            # Decided before anything is written: a fork over its limit leaves no trace.
            outlines = message_outlines(session_id=parent.pk, epoch=parent.epoch)
            plan = fork_plan(outlines, tool_use_id=tool_use_id)
            fork_size_check(snapshot, plan)
        child = AgentSession.objects.create(
            owner_id=parent.owner_id,
            title=_title(title, task),
            model=parent.model,
            system_prompt=parent.system_prompt,
            context_window=parent.context_window,
            compact_threshold=parent.compact_threshold,
            settings=budget_not_inherited(parent.settings),
            client_tools=parent.client_tools,
            token_ratio=parent.token_ratio,
            # A child of an agent's session is one of the agent's too: it sees the agent's
            # instructions (the parent's system prompt begins with them) and knowledge.
            agent_id=parent.agent_id,
            parent_session=parent,
            root_session_id=parent.root_id,
            depth=parent.depth + 1,
            spawn_mode=mode,
            spawned_by_tool_use_id=tool_use_id,
        )
        if (mode == MODE_FORK or copy_notepad) and parent.notepad:
            notepad_services.notepad_write(session_id=child.pk, content=parent.notepad, author=COPY_AUTHOR)
        if plan is not None:
            _history_copy(parent=parent, child=child, plan=plan)
            scratchpad_services.scratchpad_copy(
                source_session_id=parent.pk, target_session_id=child.pk, author=COPY_AUTHOR
            )
        event_emit(
            session_id=parent.pk,
            type="session.spawned",
            payload={
                "child_session_id": str(child.pk),
                "mode": mode,
                "tool_use_id": tool_use_id,
                "title": child.title,
            },
        )
    return child


def subsession_discard(*, child_id: uuid.UUID) -> bool:
    """Delete the child if its turn never began (its parent's call was abandoned before, or the
    turn could not begin), with what it was given (a fork's copies): a child that never started
    is not left behind. Whether it was deleted; a child that has begun a turn is kept. The
    parent's `session.spawned` stays, as every event does."""
    with transaction.atomic():
        child = AgentSession.objects.select_for_update().filter(pk=child_id).first()
        if child is None or child.current_turn_id or Turn.objects.filter(session_id=child_id).exists():
            return False
        # A child that never began has no fork of its own, but what it holds is kept all the same.
        services.messages_content_keep(messages=Message.objects.filter(session_id=child_id))
        AgentSession.objects.filter(pk=child_id).delete()
    return True


# ---------------------------------------------------------------------------
# A fork's history
# ---------------------------------------------------------------------------
# Where a block stands in its message, in the outlines `fork_plan` pairs (not a content key).
_INDEX = "_block_index"


@dataclass(frozen=True)
class ForkPlan:
    """What a fork copies, decided from the parent's message outlines (no content read)."""

    # The parent's positions copied, in order: the copy of `positions[i]` is the fork's message i.
    positions: list[int]
    # Parent position -> indexes of its content blocks left out of the copy (an orphan tool_use
    # or tool_result); most forks have none.
    removed: dict[int, set[int]]
    # The copied messages' token estimates, summed (those with blocks left out counted whole).
    tokens: int
    # The tool_use ids of the tool results copied (their masks are copied too).
    tool_result_ids: set[str]


def _holds_tool_use(outline: MessageOutline, tool_use_id: str) -> bool:
    return outline.role == MessageRole.ASSISTANT and any(
        kind == "tool_use" and ident == tool_use_id for _, kind, ident in outline.tool_blocks
    )


def _tool_block(index: int, kind: str, ident: Any) -> dict:
    return {"type": kind, "id" if kind == "tool_use" else "tool_use_id": ident, _INDEX: index}


def fork_plan(outlines: Sequence[MessageOutline], *, tool_use_id: str) -> ForkPlan:
    """What a fork made by the call `tool_use_id` starts with: the epoch's messages before the
    assistant message holding that call (the parent's running step is not complete), without the
    pre-compaction warning (an instruction to the parent, not to the fork), and with no orphan
    tool_use or tool_result (`tool_pairs_complete`, run on the outlines' tool blocks; a message
    left with no block is not copied)."""
    cut = next((i for i, o in enumerate(outlines) if _holds_tool_use(o, tool_use_id)), len(outlines))
    kept = [o for o in outlines[:cut] if o.kind != "compaction_warning"]
    # Each message as its tool blocks, plus one stand-in for all its other blocks (which pairing
    # never takes out): enough for `tool_pairs_complete` to decide.
    sketches = [
        (
            o.role,
            [_tool_block(*block) for block in o.tool_blocks]
            + ([{"type": "text"}] if o.blocks > len(o.tool_blocks) else []),
        )
        for o in kept
    ]
    positions: list[int] = []
    removed: dict[int, set[int]] = {}
    tokens = 0
    results: set[str] = set()
    for outline, blocks in zip(kept, tool_pairs_complete(sketches), strict=True):
        if not blocks:
            continue
        positions.append(outline.position)
        tokens += outline.token_estimate
        left = {index for index, _, _ in outline.tool_blocks} - {b[_INDEX] for b in blocks if _INDEX in b}
        if left:
            removed[outline.position] = left
        results |= {
            str(b["tool_use_id"])
            for b in blocks
            if b.get("type") == "tool_result" and b["tool_use_id"] is not None
        }
    return ForkPlan(positions=positions, removed=removed, tokens=tokens, tool_result_ids=results)


def fork_max_tokens(session: SessionSnapshot) -> tuple[int, str]:
    """The most tokens of history a fork of `session` may copy, and where that limit comes from
    (for the model's error): the session's `subsessions.fork_max_tokens`, never above the
    service's PALIMPSEST_FORK_MAX_TOKENS."""
    setting = int(session.setting("subsessions", "fork_max_tokens"))
    ceiling = int(django_settings.PALIMPSEST_FORK_MAX_TOKENS)
    if setting <= ceiling:
        return setting, prompts.FORK_LIMIT_SESSION
    return ceiling, prompts.FORK_LIMIT_SERVICE.format(setting=setting)


def fork_size_check(session: SessionSnapshot, plan: ForkPlan) -> None:
    """Raise `SubsessionRefused` when the fork would copy more than `fork_max_tokens` allows."""
    limit, source = fork_max_tokens(session)
    if plan.tokens > limit:
        raise SubsessionRefused(
            prompts.FORK_TOO_LARGE.format(tokens=plan.tokens, limit=limit, limit_source=source)
        )


def tool_pairs_complete(messages: Sequence[tuple[str, list[dict]]]) -> list[list[dict]]:
    """The messages' contents with every tool_use that the next user turn does not answer, and
    every tool_result that answers no tool_use of the assistant turn before it, taken out (an
    emptied message is an empty list). Consecutive messages of one role are one turn, as the
    request merges them. Repeated until stable: taking a block out may merge two turns."""
    contents = [list(content) for _, content in messages]
    roles = [role for role, _ in messages]
    while True:
        turns: list[list[int]] = []
        for index, content in enumerate(contents):
            if not content:
                continue
            if turns and roles[turns[-1][-1]] == roles[index]:
                turns[-1].append(index)
            else:
                turns.append([index])
        changed = False
        for number, members in enumerate(turns):
            if roles[members[0]] != MessageRole.USER:
                continue
            before = turns[number - 1] if number else []
            asked = {b.get("id") for i in before for b in contents[i] if b.get("type") == "tool_use"}
            answered = {
                b.get("tool_use_id") for i in members for b in contents[i] if b.get("type") == "tool_result"
            }
            paired = asked & answered
            for i in members:
                kept = [
                    b for b in contents[i] if b.get("type") != "tool_result" or b.get("tool_use_id") in paired
                ]
                changed |= len(kept) != len(contents[i])
                contents[i] = kept
            for i in before:
                kept = [b for b in contents[i] if b.get("type") != "tool_use" or b.get("id") in paired]
                changed |= len(kept) != len(contents[i])
                contents[i] = kept
        # An assistant turn at the end asks what nobody answered.
        if turns and roles[turns[-1][0]] == MessageRole.ASSISTANT:
            for i in turns[-1]:
                kept = [b for b in contents[i] if b.get("type") != "tool_use"]
                changed |= len(kept) != len(contents[i])
                contents[i] = kept
        if not changed:
            return contents


def _history_copy(*, parent: AgentSession, child: AgentSession, plan: ForkPlan) -> None:
    """The fork's epoch 0 as `plan` says: the parent's current epoch as its model sees it, with
    the masks of the results it keeps and the parent's tasks finished in that epoch (shown
    collapsed), so the fork's first request shows the copied part as the parent's would.

    The rows are copied inside the database (`services.messages_copy`); only a message with
    blocks left out is read, changed and written again (rare: an orphan at the cut)."""
    copied = services.messages_copy(
        source_session_id=parent.pk,
        positions=plan.positions,
        target_session_id=child.pk,
        marker={"type": "forked", "from_session": str(parent.pk)},
    )
    positions = {source: target for target, source in enumerate(plan.positions)}
    for source, left in plan.removed.items():
        original = messages_with_content(Message.objects.filter(session_id=parent.pk, position=source))
        content = original.values_list(RESOLVED, flat=True).get()
        kept = [block for index, block in enumerate(content) if index not in left]
        # A copy that differs from its source holds its own content.
        copy = Message.objects.filter(session_id=child.pk, position=positions[source])
        copy.update(content=kept, content_source=None, token_estimate=estimate_json_tokens(kept))
        # Its own content now: searched as its own (the content in hand, not read again).
        row = copy.values("pk", "epoch", "role", "metadata", "created_at").get()
        services.recall_message_index(
            session_id=child.pk,
            epoch=row["epoch"],
            role=row["role"],
            content=kept,
            metadata=row["metadata"],
            at=row["created_at"],
            message_id=row["pk"],
        )
    AgentSession.objects.filter(pk=child.pk).update(next_position=copied)
    services.masked_results_copy(
        source_session_id=parent.pk,
        source_epoch=parent.epoch,
        target_session_id=child.pk,
        tool_use_ids=plan.tool_result_ids,
    )
    tasks_services.tasks_copy_finished(
        source_session_id=parent.pk,
        source_epoch=parent.epoch,
        target_session_id=child.pk,
        positions=positions,
    )
