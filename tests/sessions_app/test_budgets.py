"""Budgets (DESIGN.md, "Operating Palimpsest"; issue 36 item 4): `settings.budget` checked before
each model call, the turn stopped with `budget_reached` before spending past a limit, nothing
lost, and raising the budget lets the next message go on. A root's budget counts its tree."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync

from sessions_app.budgets import budget_not_inherited, budget_reached
from sessions_app.engine import runner
from sessions_app.engine import sessions as engine_sessions
from sessions_app.engine.budget_check import price_here
from sessions_app.engine.operator import compaction_operator_start
from sessions_app.models import AgentSession, Archive, Message, ModelCall, SessionEvent, Turn
from sessions_app.validation import SpecError
from tests.dashboard.conftest import session_new
from tests.fake_anthropic import error, text, tool_use
from tests.sessions_app.test_usage import PRICES

pytestmark = pytest.mark.django_db(transaction=True)


def chat(session_id: Any, content: str) -> Turn:
    """One whole turn; its row once it ended."""

    async def turn() -> Any:
        turn_id = await runner.turn_start(session_id=session_id, content=content)
        await runner.turns_wait_idle(timeout=30)
        return turn_id

    return Turn.objects.get(pk=async_to_sync(turn)())


def budget(session: AgentSession, **limits: Any) -> None:
    engine_sessions.session_update(session_id=session.pk, settings={"budget": limits})


def spent(session: AgentSession) -> AgentSession:
    return AgentSession.objects.get(pk=session.pk)


def roles(session: AgentSession) -> list[str]:
    return list(Message.objects.filter(session=session).order_by("position").values_list("role", flat=True))


def completed(session: AgentSession) -> list[str]:
    return [
        e.payload["stop_reason"]
        for e in SessionEvent.objects.filter(session=session, type="turn.completed").order_by("seq")
    ]


# ---------------------------------------------------------------------------
# Settings
# ---------------------------------------------------------------------------
def test_the_default_budget_is_no_limit() -> None:
    session = session_new()
    assert session.settings["budget"] == {
        "max_cost_usd": None,
        "max_input_tokens": None,
        "max_output_tokens": None,
    }


@pytest.mark.parametrize(
    "limits",
    [
        {"max_cost_usd": -1},
        {"max_cost_usd": "5"},
        {"max_input_tokens": 1.5},
        {"max_input_tokens": -3},
        {"max_output_tokens": True},
        {"max_tokens": 5},
    ],
)
def test_a_bad_budget_value_is_refused_and_changes_nothing(limits: dict) -> None:
    session = session_new(settings={"budget": {"max_output_tokens": 100}})
    with pytest.raises(SpecError) as refused:
        engine_sessions.session_update(session_id=session.pk, title="changed", settings={"budget": limits})
    assert refused.value.code == "invalid_settings"
    assert "settings.budget." in refused.value.message
    stored = spent(session)
    assert stored.title == session.title
    assert stored.settings == session.settings


def test_null_lifts_a_limit_and_the_others_stay() -> None:
    session = session_new(settings={"budget": {"max_output_tokens": 100, "max_cost_usd": 2}})
    budget(session, max_output_tokens=None)
    assert spent(session).settings["budget"] == {
        "max_cost_usd": 2,
        "max_input_tokens": None,
        "max_output_tokens": None,
    }


def test_a_child_does_not_inherit_the_budget() -> None:
    settings = session_new(settings={"budget": {"max_cost_usd": 1}, "max_steps_per_turn": 5}).settings
    inherited = budget_not_inherited(settings)
    assert inherited["budget"] == {"max_cost_usd": None, "max_input_tokens": None, "max_output_tokens": None}
    assert inherited["max_steps_per_turn"] == 5


# ---------------------------------------------------------------------------
# The check before each model call (the scripted model: usage without prices)
# ---------------------------------------------------------------------------
def test_a_turn_stops_before_a_call_whose_estimate_would_pass_max_input_tokens() -> None:
    session = session_new(settings={"budget": {"max_input_tokens": 10}})
    turn = chat(session.pk, "echo hello")
    assert (turn.stop_reason, turn.steps, turn.error) == ("budget_reached", 0, "")
    assert not ModelCall.objects.filter(session=session).exists()
    # The message is kept, the session is idle (not an error) and can take the next one.
    assert roles(session) == ["user"]
    assert spent(session).status == "idle"
    assert completed(session) == ["budget_reached"]


def test_the_estimate_stops_the_call_before_its_input_is_spent() -> None:
    session = session_new()
    chat(session.pk, "echo one")
    first = spent(session).usage_input_tokens
    # Room for a little more input, not for the next request (which repeats the first).
    budget(session, max_input_tokens=first + 5)
    turn = chat(session.pk, "echo two")
    assert turn.stop_reason == "budget_reached"
    assert spent(session).usage_input_tokens == first  # nothing past it was spent
    assert ModelCall.objects.filter(session=session).count() == 1


def test_max_output_tokens_reached_stops_the_next_call() -> None:
    session = session_new(settings={"budget": {"max_output_tokens": 1}})
    # Nothing spent yet: the call is made (its answer may pass the limit: output is not known
    # before it is written).
    assert chat(session.pk, "echo a long enough answer").stop_reason == "end_turn"
    assert spent(session).usage_output_tokens > 1
    turn = chat(session.pk, "echo again")
    assert turn.stop_reason == "budget_reached"
    assert ModelCall.objects.filter(session=session).count() == 1


def test_raising_the_budget_lets_the_next_message_go_on_with_nothing_lost() -> None:
    session = session_new(settings={"budget": {"max_input_tokens": 10}})
    assert chat(session.pk, "echo first").stop_reason == "budget_reached"
    budget(session, max_input_tokens=1_000_000)
    turn = chat(session.pk, "echo second")
    assert turn.stop_reason == "end_turn"
    assert roles(session) == ["user", "user", "assistant"]
    # The request held both messages: the one the budget stopped, and the next.
    (call,) = ModelCall.objects.filter(session=session)
    assert call.input_tokens > 0
    assert completed(session) == ["budget_reached", "end_turn"]


def test_lifting_the_limit_with_null_lets_the_next_message_go_on() -> None:
    session = session_new(settings={"budget": {"max_input_tokens": 0}})
    assert chat(session.pk, "echo first").stop_reason == "budget_reached"
    budget(session, max_input_tokens=None)
    assert chat(session.pk, "echo second").stop_reason == "end_turn"


# ---------------------------------------------------------------------------
# Through the real SDK against the fake Messages API: costs, a stop inside a turn
# ---------------------------------------------------------------------------
@pytest.fixture
def priced(settings: Any) -> None:
    settings.PALIMPSEST_MODEL_PRICES = PRICES


def cost_of(session: AgentSession) -> float:
    row = spent(session)
    price = price_here(row.model)
    assert price is not None
    return (
        row.usage_input_tokens * price.input
        + row.usage_output_tokens * price.output
        + row.usage_cache_creation_tokens * price.cache_write
        + row.usage_cache_read_tokens * price.cache_read
    ) / 1_000_000


def test_max_cost_usd_reached_stops_the_turn(strict_fake: Any, priced: None) -> None:
    fake = strict_fake()
    fake.default_reply = text("Noted.")
    session = session_new(model="claude-sonnet-4-6")
    chat(session.pk, "first question")
    cost = cost_of(session)
    assert cost > 0
    budget(session, max_cost_usd=cost)
    assert chat(session.pk, "second question").stop_reason == "budget_reached"
    assert len(fake.requests) == 1


def test_max_cost_usd_stops_a_call_whose_input_would_pass_it(strict_fake: Any, priced: None) -> None:
    fake = strict_fake()
    fake.default_reply = text("Noted.")
    session = session_new(model="claude-sonnet-4-6")
    chat(session.pk, "first question")
    cost = cost_of(session)
    # A hundredth of a cent more: less than the next request's input costs.
    budget(session, max_cost_usd=cost + 0.0001)
    assert chat(session.pk, "second question").stop_reason == "budget_reached"
    assert len(fake.requests) == 1
    budget(session, max_cost_usd=cost + 1)
    assert chat(session.pk, "third question").stop_reason == "end_turn"
    assert len(fake.requests) == 2


def test_a_stop_between_steps_keeps_the_tool_results_and_the_next_turn_is_valid(
    strict_fake: Any, priced: None
) -> None:
    fake = strict_fake()
    session = session_new(model="claude-sonnet-4-6")
    # Step 1 asks for a tool; after its result the output budget is spent: no step 2.
    fake.enqueue(tool_use("update_notepad", {"operation": "append", "content": "the key is blue\n"}))
    budget(session, max_output_tokens=1)
    turn = chat(session.pk, "remember the key")
    assert (turn.stop_reason, turn.steps) == ("budget_reached", 1)
    assert roles(session) == ["user", "assistant", "user"]  # the tool's result is stored
    assert spent(session).notepad == "the key is blue\n"
    budget(session, max_output_tokens=None)
    fake.enqueue(text("The key is blue."))
    # The strict fake refuses a request the real API would (roles, tool pairs): it answers.
    assert chat(session.pk, "what was the key?").stop_reason == "end_turn"
    assert len(fake.requests) == 2


# ---------------------------------------------------------------------------
# A root's budget counts its whole tree
# ---------------------------------------------------------------------------
def test_a_childs_calls_count_in_the_roots_budget() -> None:
    root = session_new()
    chat(root.pk, "spawn echo 42")
    (child,) = AgentSession.objects.filter(parent_session=root)
    own = spent(root).usage_output_tokens
    assert spent(child).usage_output_tokens > 0
    # One output token more than the root spent itself, less than its tree did.
    budget(root, max_output_tokens=own + 1)
    assert chat(root.pk, "echo more").stop_reason == "budget_reached"
    stop = budget_reached(
        session_id=root.pk, root_id=root.pk, model=root.model, input_estimate=0, price_of=price_here
    )
    assert stop is not None and stop.limit == "max_output_tokens" and stop.session_id == root.pk


def test_a_child_stops_on_its_roots_budget_and_the_parent_reads_why() -> None:
    root = session_new(settings={"budget": {"max_output_tokens": 1}})
    # The root's first call is made (nothing spent); the child's would pass the root's budget.
    turn = chat(root.pk, "spawn echo 42")
    (child,) = AgentSession.objects.filter(parent_session=root)
    assert child.settings["budget"]["max_output_tokens"] is None  # not inherited
    assert not ModelCall.objects.filter(session=child).exists()
    assert completed(child) == ["budget_reached"]
    result = next(
        e.payload for e in SessionEvent.objects.filter(session=root, type="tool.result").order_by("seq")
    )
    assert '"status": "budget_reached"' in result["content"]
    # The parent's own next call meets the same budget.
    assert turn.stop_reason == "budget_reached"
    # Raised, the tree goes on.
    budget(root, max_output_tokens=None)
    assert chat(root.pk, "echo on").stop_reason == "end_turn"


# ---------------------------------------------------------------------------
# Compaction's calls are model calls too
# ---------------------------------------------------------------------------
def warnings_of(session: AgentSession) -> int:
    return Message.objects.filter(session=session, metadata__type="compaction_warning").count()


def test_the_summary_call_is_not_made_past_the_budget_and_compaction_follows_the_raise() -> None:
    session = session_new(context_window=4000, compact_threshold=0.5)
    # Each turn may make one call: the output budget is one token past what was spent.
    for index in range(12):
        budget(session, max_output_tokens=spent(session).usage_output_tokens + 1)
        turn = chat(session.pk, f"message {index} " + "filler words " * 40)
        if warnings_of(session):
            break
    assert warnings_of(session) == 1, "the history never reached the threshold"
    # The warning step was answered; the summary call after it was not made.
    assert turn.stop_reason == "budget_reached"
    assert not Archive.objects.filter(session=session).exists()
    assert not ModelCall.objects.filter(session=session).exclude(purpose="turn").exists()
    stored = spent(session)
    assert (stored.status, stored.epoch) == ("idle", 0)
    budget(session, max_output_tokens=None)
    assert chat(session.pk, "go on").stop_reason == "end_turn"
    assert Archive.objects.filter(session=session).exists()
    assert spent(session).epoch == 1


def test_an_operators_compaction_is_not_made_past_the_budget() -> None:
    session = session_new()
    chat(session.pk, "echo something to compact")
    budget(session, max_output_tokens=1)
    calls = ModelCall.objects.filter(session=session).count()

    async def compact() -> str | None:
        turn_id = await compaction_operator_start(session_id=session.pk)
        return await runner.turn_wait(turn_id)

    assert async_to_sync(compact)() == "error"
    assert ModelCall.objects.filter(session=session).count() == calls
    assert not Archive.objects.filter(session=session).exists()
    error = SessionEvent.objects.filter(session=session, type="error").order_by("-seq").first()
    assert error is not None and "Budget reached" in error.payload["message"]


def test_no_compaction_warning_is_stored_when_the_budget_forbids_its_step() -> None:
    session = session_new(context_window=4000, compact_threshold=0.5)
    chat(session.pk, "echo a first answer")
    budget(session, max_output_tokens=spent(session).usage_output_tokens)  # reached
    # The messages pile up unanswered, past the threshold: the warning step is never made, so
    # no warning is stored either (each turn would otherwise store another).
    for index in range(8):
        assert chat(session.pk, f"message {index} " + "filler words " * 40).stop_reason == "budget_reached"
    assert warnings_of(session) == 0
    assert ModelCall.objects.filter(session=session).count() == 1
    budget(session, max_output_tokens=None)
    assert chat(session.pk, "go on").stop_reason == "end_turn"
    assert warnings_of(session) == 1
    assert Archive.objects.filter(session=session).exists()


# ---------------------------------------------------------------------------
# The answer cannot pass the budget: max_tokens is lowered to what it leaves
# ---------------------------------------------------------------------------
def test_a_calls_max_tokens_is_lowered_to_the_output_tokens_the_budget_leaves(strict_fake: Any) -> None:
    fake = strict_fake()
    fake.default_reply = text("Noted.")
    session = session_new(model="claude-sonnet-4-6", settings={"budget": {"max_output_tokens": 40}})
    chat(session.pk, "first question")
    assert fake.requests[0].body["max_tokens"] == 40
    used = spent(session).usage_output_tokens
    assert 0 < used < 40
    chat(session.pk, "second question")
    assert fake.requests[1].body["max_tokens"] == 40 - used
    budget(session, max_output_tokens=None)
    chat(session.pk, "third question")
    assert fake.requests[2].body["max_tokens"] > 40  # no budget: the usual bound


def test_a_cost_budget_lowers_max_tokens_to_what_its_money_leaves_after_the_input(
    strict_fake: Any, priced: None
) -> None:
    fake = strict_fake()
    fake.default_reply = text("Noted.")
    session = session_new(model="claude-sonnet-4-6")
    chat(session.pk, "first question")
    cost = cost_of(session)
    # Enough for the next request's input (about 3,500 tokens at $3 per million) and about 100
    # output tokens at $15 per million.
    row = spent(session)
    next_input = (
        row.usage_input_tokens + row.usage_cache_creation_tokens + row.usage_cache_read_tokens
    ) * 1.1
    allowed = cost + next_input * 3.0 / 1_000_000 + 100 * 15.0 / 1_000_000
    budget(session, max_cost_usd=allowed)
    chat(session.pk, "second question")
    lowered = fake.requests[1].body["max_tokens"]
    assert 50 < lowered < 200
    assert cost_of(session) <= allowed


def test_a_childs_calls_are_held_to_what_its_roots_budget_leaves() -> None:
    root = session_new(settings={"budget": {"max_output_tokens": 1_000}})
    chat(root.pk, "spawn echo 42")
    (child,) = AgentSession.objects.filter(parent_session=root)
    calls = list(ModelCall.objects.filter(session=child).order_by("started_at", "pk"))
    assert calls and all(c.request["max_tokens"] <= 1_000 for c in calls)
    root_first = ModelCall.objects.filter(session=root).order_by("started_at", "pk").first()
    assert root_first is not None
    spent_before_child = root_first.output_tokens
    assert calls[0].request["max_tokens"] == 1_000 - spent_before_child


def test_the_retry_after_a_prompt_too_long_refusal_is_checked_against_the_budget(strict_fake: Any) -> None:
    fake = strict_fake()
    fake.default_reply = text("Noted.")
    session = session_new(model="claude-sonnet-4-6", context_window=20_000)
    for index in range(3):
        chat(session.pk, f"question {index}: " + "palimpsest " * 300)
    row = spent(session)
    so_far = row.usage_input_tokens + row.usage_cache_creation_tokens + row.usage_cache_read_tokens
    last = row.last_prompt_tokens
    assert last is not None
    # Room for the next request and for the summary call (each about the last request), not for
    # the retry after them.
    budget(session, max_input_tokens=so_far + int(1.2 * last))
    requests_before = len(fake.requests)
    fake.enqueue(error(400, "invalid_request_error", "prompt is too long: 250000 tokens > 200000 maximum"))
    turn = chat(session.pk, "one more")
    assert turn.stop_reason == "budget_reached"
    # The refused call and the summary call were made; the retry was not.
    assert len(fake.requests) == requests_before + 2
    assert spent(session).usage_input_tokens + spent(session).usage_cache_creation_tokens + spent(
        session
    ).usage_cache_read_tokens <= so_far + int(1.2 * last)
