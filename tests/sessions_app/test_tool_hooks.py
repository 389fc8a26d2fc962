"""The engine's extension points used by features: tools offered per turn, tool-call hooks."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from sessions_app.common.types import ToolOutcome
from sessions_app.engine import tool_hooks
from sessions_app.engine.contract import Feature, SessionSnapshot, ToolInput, ToolSpec
from sessions_app.engine.features import FeatureSet

SESSION = SessionSnapshot(
    id=uuid.uuid4(), model="m", system_prompt="", context_window=1000, compact_threshold=0.8, settings={}
)
TURN = uuid.uuid4()


async def _handler(ctx: Any, tool_input: dict) -> str:
    return "ok"


def _feature_set(offered: Any) -> FeatureSet:
    always = ToolSpec("always", "", {"type": "object"}, _handler)
    per_turn = ToolSpec("per_turn", "", {"type": "object"}, _handler, offered_in_turn=offered)
    return FeatureSet([Feature(name="a", tools=[always]), Feature(name="b", tools=[per_turn])])


def test_a_per_turn_tool_is_offered_when_its_check_says_so() -> None:
    feature_set = _feature_set(lambda session, turn_id: turn_id == TURN)
    assert [s.name for s in feature_set.tools_for_session(SESSION, turn_id=TURN)] == ["always", "per_turn"]
    assert [s.name for s in feature_set.tools_for_session(SESSION, turn_id=uuid.uuid4())] == ["always"]


def test_a_per_turn_tool_is_not_offered_without_a_turn() -> None:
    feature_set = _feature_set(lambda session, turn_id: True)
    assert [s.name for s in feature_set.tools_for_session(SESSION)] == ["always"]


class _Hook:
    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.seen: list[list[str]] = []

    def turn_started(self, *, session: SessionSnapshot, turn_id: uuid.UUID) -> None:
        self.seen.append([str(turn_id)])

    def inputs_resolve(
        self, *, session: SessionSnapshot, turn_id: uuid.UUID, inputs: list[ToolInput]
    ) -> list[ToolInput]:
        self.seen.append([i.tool_use_id for i in inputs])
        return [
            ToolInput(i.tool_use_id, i.name, i.input, error="refused")
            if i.name == "bad"
            else ToolInput(i.tool_use_id, i.name, {**i.input, self.tag: True})
            for i in inputs
        ]

    def outcomes_process(
        self, *, session: SessionSnapshot, turn_id: uuid.UUID, outcomes: list[ToolOutcome]
    ) -> list[ToolOutcome]:
        return [
            ToolOutcome(o.tool_use_id, o.name, o.raw, f"{o.content}+{self.tag}", o.is_error) for o in outcomes
        ]


@pytest.fixture
def hooks() -> Iterator[tuple[_Hook, _Hook]]:
    yield _Hook("first"), _Hook("second")


def test_hooks_rewrite_inputs_in_turn(hooks: tuple[_Hook, _Hook]) -> None:
    (result,) = tool_hooks.inputs_resolve(
        hooks=hooks, session=SESSION, turn_id=TURN, inputs=[ToolInput("t1", "good", {})]
    )
    assert result.input == {"first": True, "second": True}


def test_a_refused_input_is_not_given_to_later_hooks(hooks: tuple[_Hook, _Hook]) -> None:
    first, second = hooks
    bad, good = tool_hooks.inputs_resolve(
        hooks=hooks,
        session=SESSION,
        turn_id=TURN,
        inputs=[ToolInput("t1", "bad", {}), ToolInput("t2", "good", {})],
    )
    assert (bad.error, good.error) == ("refused", None)
    assert second.seen == [["t2"]]


def test_hooks_process_outcomes_in_turn(hooks: tuple[_Hook, _Hook]) -> None:
    (outcome,) = tool_hooks.outcomes_process(
        hooks=hooks, session=SESSION, turn_id=TURN, outcomes=[ToolOutcome("t1", "x", "r", "c", False)]
    )
    assert outcome.content == "c+first+second"


def test_every_hook_hears_that_a_turn_started(hooks: tuple[_Hook, _Hook]) -> None:
    tool_hooks.turn_started(hooks=hooks, session=SESSION, turn_id=TURN)
    assert [h.seen for h in hooks] == [[[str(TURN)]], [[str(TURN)]]]


def test_two_features_may_not_offer_the_same_tool() -> None:
    spec = ToolSpec("same", "", {"type": "object"}, _handler)
    with pytest.raises(ValueError, match="same"):
        FeatureSet([Feature(name="a", tools=[spec]), Feature(name="b", tools=[spec])])


def test_a_setting_belongs_to_one_feature_and_has_a_rule() -> None:
    with pytest.raises(ValueError, match="own the setting"):
        FeatureSet(
            [
                Feature(name="a", settings={"x": 1}, settings_rules={"x": ("int", 0, 9)}),
                Feature(name="b", settings={"x": 2}, settings_rules={"x": ("int", 0, 9)}),
            ]
        )
    with pytest.raises(ValueError, match="no validation rule"):
        FeatureSet([Feature(name="a", settings={"x": 1})])
