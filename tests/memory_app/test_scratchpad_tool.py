"""`session_scratchpad`: every action and budget rule of seed 003, as the model experiences it
(the tool result it receives through the fake Messages API), plus the state it leaves."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from memory_app.scratchpad.models import ScratchpadRevision
from sessions_app.common.tool_input import NOT_RUN
from sessions_app.models import SessionEvent
from tests.fake_anthropic import text, tool_use
from tests.memory_app.scratchpad_support import TOOL, call_tool, open_session, pad, run_turn, seed

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("without_notepad")]

ACTIONS = "set_notes, append_notes, set_plan, refs.add, refs.remove, refs.set"


def small(**limits: int) -> dict:
    return {"settings": {"scratchpad": limits}}


# ---------------------------------------------------------------------------
# notes
# ---------------------------------------------------------------------------
async def test_set_notes_replaces_notes_and_reports_usage(connect: Any, fake_anthropic: Any) -> None:
    client, session_id = await open_session(connect)
    await seed(session_id, {"action": "set_notes", "content": "old"})

    result, is_error = await call_tool(client, fake_anthropic, {"action": "set_notes", "content": "x" * 812})

    assert (result, is_error) == ("notes set: 812/4000 chars used", False)
    assert (await pad(session_id)).notes == "x" * 812


async def test_set_notes_over_budget_truncates_and_says_so(connect: Any, fake_anthropic: Any) -> None:
    client, session_id = await open_session(connect, **small(notes_max_chars=20))

    result, is_error = await call_tool(client, fake_anthropic, {"action": "set_notes", "content": "a" * 30})

    assert not is_error
    assert result == (
        "notes set: 20/20 chars used. "
        "Warning: notes truncated to 20 chars (original: 30). Consider summarizing."
    )
    assert (await pad(session_id)).notes == "a" * 20


async def test_set_notes_without_content_is_an_error(connect: Any, fake_anthropic: Any) -> None:
    client, session_id = await open_session(connect)

    result, is_error = await call_tool(client, fake_anthropic, {"action": "set_notes"})

    assert (result, is_error) == ("set_notes needs content (a string).", True)


async def test_append_notes_joins_with_one_newline(connect: Any, fake_anthropic: Any) -> None:
    client, session_id = await open_session(connect)
    await seed(session_id, {"action": "set_notes", "content": "first"})

    result, is_error = await call_tool(
        client, fake_anthropic, {"action": "append_notes", "content": "second"}
    )

    assert (result, is_error) == ("notes appended: 12/4000 chars used", False)
    assert (await pad(session_id)).notes == "first\nsecond"


async def test_append_notes_to_empty_notes_adds_no_newline(connect: Any, fake_anthropic: Any) -> None:
    client, session_id = await open_session(connect)

    await call_tool(client, fake_anthropic, {"action": "append_notes", "content": "only"})

    assert (await pad(session_id)).notes == "only"


async def test_append_notes_up_to_the_budget_is_accepted(connect: Any, fake_anthropic: Any) -> None:
    client, session_id = await open_session(connect, **small(notes_max_chars=10))
    await seed(session_id, {"action": "set_notes", "content": "abcd"})

    result, is_error = await call_tool(client, fake_anthropic, {"action": "append_notes", "content": "efghi"})

    assert (result, is_error) == ("notes appended: 10/10 chars used", False)


async def test_append_over_budget_is_rejected_and_leaves_notes_unchanged(
    connect: Any, fake_anthropic: Any
) -> None:
    client, session_id = await open_session(connect, **small(notes_max_chars=10))
    await seed(session_id, {"action": "set_notes", "content": "abcd"})

    result, is_error = await call_tool(
        client, fake_anthropic, {"action": "append_notes", "content": "efghij"}
    )

    assert is_error
    assert result == (
        "Append would exceed the 10-char notes budget (current: 4, append: 6, combined: 11). Notes are "
        "unchanged. Use set_notes to rewrite them as a tighter summary, or reduce content."
    )
    assert (await pad(session_id)).notes == "abcd"


async def test_rejected_append_writes_no_revision_or_event(connect: Any, fake_anthropic: Any) -> None:
    client, session_id = await open_session(connect, **small(notes_max_chars=5))

    await call_tool(client, fake_anthropic, {"action": "append_notes", "content": "too long"})

    assert await sync_to_async(ScratchpadRevision.objects.filter(session_id=session_id).count)() == 0
    events = SessionEvent.objects.filter(session_id=session_id, type="scratchpad.updated")
    assert await sync_to_async(events.count)() == 0


async def test_append_notes_with_empty_content_is_an_error(connect: Any, fake_anthropic: Any) -> None:
    client, session_id = await open_session(connect)

    result, is_error = await call_tool(client, fake_anthropic, {"action": "append_notes", "content": ""})

    assert (result, is_error) == ("append_notes needs content (a non-empty string).", True)


# ---------------------------------------------------------------------------
# plan
# ---------------------------------------------------------------------------
async def test_set_plan_replaces_plan_and_reports_usage(connect: Any, fake_anthropic: Any) -> None:
    client, session_id = await open_session(connect)
    plan = "1. Fix auth bug\n2. Add test\n3. Update docs"

    result, is_error = await call_tool(client, fake_anthropic, {"action": "set_plan", "content": plan})

    assert (result, is_error) == (f"plan set: {len(plan)}/2000 chars used", False)
    assert (await pad(session_id)).plan == plan


async def test_set_plan_over_budget_truncates_and_says_so(connect: Any, fake_anthropic: Any) -> None:
    client, session_id = await open_session(connect, **small(plan_max_chars=8))

    result, is_error = await call_tool(
        client, fake_anthropic, {"action": "set_plan", "content": "1. one 2. two"}
    )

    assert not is_error
    assert result == (
        "plan set: 8/8 chars used. Warning: plan truncated to 8 chars (original: 13). Consider summarizing."
    )
    assert (await pad(session_id)).plan == "1. one 2"


# ---------------------------------------------------------------------------
# refs
# ---------------------------------------------------------------------------
async def test_refs_add_appends_and_reports_usage(connect: Any, fake_anthropic: Any) -> None:
    client, session_id = await open_session(connect)

    result, is_error = await call_tool(
        client, fake_anthropic, {"action": "refs.add", "ref": "src/auth/login.ts"}
    )

    assert (result, is_error) == ("ref added: 1/50 refs used", False)
    assert (await pad(session_id)).refs == ["src/auth/login.ts"]


@pytest.mark.parametrize("bad", [{"ref": ""}, {"ref": "   "}, {}, {"ref": None}])
async def test_refs_add_needs_a_non_empty_string(connect: Any, fake_anthropic: Any, bad: dict) -> None:
    client, session_id = await open_session(connect)

    result, is_error = await call_tool(client, fake_anthropic, {"action": "refs.add", **bad})

    assert (result, is_error) == ("refs.add needs ref (a non-empty string).", True)
    assert (await pad(session_id)).refs == []


@pytest.mark.parametrize(("ref", "kind"), [(42, "an integer"), (["a"], "an array")])
async def test_refs_add_with_a_ref_that_is_not_a_string_names_what_it_got(
    connect: Any, fake_anthropic: Any, ref: Any, kind: str
) -> None:
    client, session_id = await open_session(connect)

    result, is_error = await call_tool(client, fake_anthropic, {"action": "refs.add", "ref": ref})

    assert (result, is_error) == (f'session_scratchpad: "ref" must be a string, not {kind}. {NOT_RUN}', True)
    assert (await pad(session_id)).refs == []


async def test_refs_add_at_capacity_drops_the_oldest_whole(connect: Any, fake_anthropic: Any) -> None:
    client, session_id = await open_session(connect, **small(refs_max_items=3))
    await seed(session_id, {"action": "refs.set", "items": ["a", "b", "c"]})

    result, is_error = await call_tool(client, fake_anthropic, {"action": "refs.add", "ref": "d"})

    assert (result, is_error) == (
        "ref added: 3/3 refs used. The oldest ref was dropped to make room: a",
        False,
    )
    assert (await pad(session_id)).refs == ["b", "c", "d"]


async def test_refs_add_of_a_present_ref_moves_it_to_the_newest_place(
    connect: Any, fake_anthropic: Any
) -> None:
    client, session_id = await open_session(connect)
    await seed(session_id, {"action": "refs.set", "items": ["a", "b"]})

    result, is_error = await call_tool(client, fake_anthropic, {"action": "refs.add", "ref": "a"})

    assert (result, is_error) == ("ref already present, moved to the newest place: 2/50 refs used", False)
    assert (await pad(session_id)).refs == ["b", "a"]


async def test_refs_add_of_an_over_long_ref_is_an_error(connect: Any, fake_anthropic: Any) -> None:
    client, session_id = await open_session(connect)

    result, is_error = await call_tool(client, fake_anthropic, {"action": "refs.add", "ref": "x" * 2001})

    assert is_error
    assert result.startswith("The ref is 2001 chars; a ref holds at most 2000")
    assert (await pad(session_id)).refs == []


async def test_refs_remove_removes_the_exact_match(connect: Any, fake_anthropic: Any) -> None:
    client, session_id = await open_session(connect)
    await seed(session_id, {"action": "refs.set", "items": ["src/a.py", "src/b.py"]})

    result, is_error = await call_tool(client, fake_anthropic, {"action": "refs.remove", "ref": "src/a.py"})

    assert (result, is_error) == ("ref removed: 1/50 refs used", False)
    assert (await pad(session_id)).refs == ["src/b.py"]


async def test_refs_remove_without_exact_match_is_an_error(connect: Any, fake_anthropic: Any) -> None:
    client, session_id = await open_session(connect)
    await seed(session_id, {"action": "refs.set", "items": ["src/a.py"]})

    result, is_error = await call_tool(client, fake_anthropic, {"action": "refs.remove", "ref": "src/A.py"})

    assert is_error
    assert result.startswith('refs.remove: no ref is exactly "src/A.py". Nothing was removed')
    assert (await pad(session_id)).refs == ["src/a.py"]


async def test_refs_remove_with_empty_ref_is_an_error(connect: Any, fake_anthropic: Any) -> None:
    client, session_id = await open_session(connect)

    result, is_error = await call_tool(client, fake_anthropic, {"action": "refs.remove", "ref": ""})

    assert (result, is_error) == ("refs.remove needs ref (a non-empty string).", True)


async def test_refs_set_replaces_all_refs(connect: Any, fake_anthropic: Any) -> None:
    client, session_id = await open_session(connect)
    await seed(session_id, {"action": "refs.set", "items": ["old"]})

    result, is_error = await call_tool(client, fake_anthropic, {"action": "refs.set", "items": ["x", "y"]})

    assert (result, is_error) == ("refs set: 2/50 refs used", False)
    assert (await pad(session_id)).refs == ["x", "y"]


async def test_refs_set_keeps_the_first_max_items(connect: Any, fake_anthropic: Any) -> None:
    client, session_id = await open_session(connect, **small(refs_max_items=3))

    result, is_error = await call_tool(
        client, fake_anthropic, {"action": "refs.set", "items": ["1", "2", "3", "4", "5"]}
    )

    assert (result, is_error) == ("refs set: 3/3 refs used", False)
    assert (await pad(session_id)).refs == ["1", "2", "3"]


async def test_refs_set_drops_non_strings_silently(connect: Any, fake_anthropic: Any) -> None:
    client, session_id = await open_session(connect)

    result, is_error = await call_tool(
        client, fake_anthropic, {"action": "refs.set", "items": [1, "a", None, {"x": 1}, ["b"], True, "b"]}
    )

    assert (result, is_error) == ("refs set: 2/50 refs used", False)
    assert (await pad(session_id)).refs == ["a", "b"]


async def test_refs_set_drops_empty_repeated_and_over_long_items(connect: Any, fake_anthropic: Any) -> None:
    client, session_id = await open_session(connect)

    await call_tool(
        client, fake_anthropic, {"action": "refs.set", "items": ["a", "", "  ", "a", "x" * 2001, " b "]}
    )

    assert (await pad(session_id)).refs == ["a", "b"]


async def test_refs_set_with_empty_list_clears_refs(connect: Any, fake_anthropic: Any) -> None:
    client, session_id = await open_session(connect)
    await seed(session_id, {"action": "refs.set", "items": ["a"]})

    result, _ = await call_tool(client, fake_anthropic, {"action": "refs.set", "items": []})

    assert result == "refs set: 0/50 refs used"
    assert (await pad(session_id)).refs == []


async def test_refs_set_without_a_list_is_an_error(connect: Any, fake_anthropic: Any) -> None:
    client, session_id = await open_session(connect)

    result, is_error = await call_tool(client, fake_anthropic, {"action": "refs.set", "items": "a, b"})

    assert (result, is_error) == (
        f'session_scratchpad: "items" must be an array, not a string. {NOT_RUN}',
        True,
    )


async def test_refs_set_without_items_is_an_error(connect: Any, fake_anthropic: Any) -> None:
    client, session_id = await open_session(connect)

    result, is_error = await call_tool(client, fake_anthropic, {"action": "refs.set"})

    assert (result, is_error) == ("refs.set needs items (a list of strings).", True)


# ---------------------------------------------------------------------------
# actions
# ---------------------------------------------------------------------------
async def test_missing_action_is_an_error_listing_valid_actions(connect: Any, fake_anthropic: Any) -> None:
    client, _ = await open_session(connect)

    result, is_error = await call_tool(client, fake_anthropic, {"content": "x"})

    assert (result, is_error) == (f'session_scratchpad needs "action": one of {ACTIONS}. {NOT_RUN}', True)


@pytest.mark.parametrize(
    ("action", "shown"), [("write", '"write"'), ("refs.clear", '"refs.clear"'), (3, "3")]
)
async def test_unknown_action_is_an_error_listing_valid_actions(
    connect: Any, fake_anthropic: Any, action: Any, shown: str
) -> None:
    client, session_id = await open_session(connect)

    result, is_error = await call_tool(client, fake_anthropic, {"action": action, "content": "x"})

    assert (result, is_error) == (
        f'session_scratchpad: "action" must be one of {ACTIONS}, not {shown}. {NOT_RUN}',
        True,
    )
    assert (await pad(session_id)).is_empty


# ---------------------------------------------------------------------------
# what a change leaves behind
# ---------------------------------------------------------------------------
async def test_a_change_is_announced_as_scratchpad_updated(connect: Any, fake_anthropic: Any) -> None:
    client, _ = await open_session(connect)
    fake_anthropic.enqueue(tool_use(TOOL, {"action": "refs.add", "ref": "src/a.py"}), text("ok"))

    frames = await run_turn(client, "go")

    (updated,) = [f for f in frames if f["type"] == "scratchpad.updated"]
    assert {k: updated[k] for k in ("space", "value", "author", "version")} == {
        "space": "refs",
        "value": ["src/a.py"],
        "author": "agent",
        "version": 1,
    }


async def test_each_change_writes_a_revision_of_its_space(connect: Any, fake_anthropic: Any) -> None:
    client, session_id = await open_session(connect)

    await call_tool(client, fake_anthropic, {"action": "set_notes", "content": "a"})
    await call_tool(client, fake_anthropic, {"action": "append_notes", "content": "b"})
    await call_tool(client, fake_anthropic, {"action": "set_plan", "content": "1. x"})

    revisions = await sync_to_async(
        lambda: list(
            ScratchpadRevision.objects.filter(session_id=session_id)
            .order_by("id")
            .values_list("space", "version", "value", "author", "action")
        )
    )()
    assert revisions == [
        ("notes", 1, "a", "agent", "set_notes"),
        ("notes", 2, "a\nb", "agent", "append_notes"),
        ("plan", 1, "1. x", "agent", "set_plan"),
    ]
