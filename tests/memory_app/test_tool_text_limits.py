"""Every text a model gives a server tool has a limit, a session setting of the tool's feature or
a named constant (`ToolSpec.text_limits`): a call over it is a tool error naming the limit and its
setting, the handler does not run, and nothing is stored or announced. The limits are not in the
schemas the model is shown (the tools block stays the same across sessions)."""

from __future__ import annotations

import json
import uuid

import pytest
from asgiref.sync import sync_to_async

from memory_app.notepad.services import NOTEPAD_MAX_CHARS
from memory_app.tasks.models import Task
from sessions_app.common.tool_input import tool_input_text_check
from sessions_app.engine.contract import TextLimit, ToolSpec
from sessions_app.engine.feature_set import FeatureSet
from sessions_app.engine.features import features
from sessions_app.models import AgentSession, SessionEvent
from tests.fake_anthropic import text, tool_use
from tests.memory_app.notepad_support import turn
from tests.memory_app.subsessions_support import Router, child_on, is_child, report, root, spawn, turn_of

MODEL = "claude-sonnet-4-6"


# -- the check --------------------------------------------------------------------------------------
def test_a_text_within_its_limit_passes() -> None:
    assert tool_input_text_check({"summary": (5, "x")}, {"summary": "12345"}, tool="end_task") is None


def test_a_text_over_its_limit_names_the_field_the_length_the_limit_and_the_setting() -> None:
    message = tool_input_text_check(
        {"summary": (5, "the session setting tasks.summary_max_chars")},
        {"summary": "123456"},
        tool="end_task",
    )
    assert message == (
        'end_task: "summary" is 6 characters, over its limit of 5 (the session setting '
        "tasks.summary_max_chars). Nothing was done; make it shorter and make the call again."
    )


def test_each_string_of_an_array_is_checked() -> None:
    message = tool_input_text_check({"items": (3, "X")}, {"items": ["abc", "abcd"]})
    assert message is not None and message.startswith('"items[1]" is 4 characters')


def test_every_text_field_of_every_server_tool_has_a_limit() -> None:
    for spec in features().tools:
        properties = spec.input_check_schema.get("properties") or {}
        texts = {
            name
            for name, sub in properties.items()
            if sub.get("type") == "string"
            and "enum" not in sub
            or sub.get("type") == "array"
            and (sub.get("items") or {}).get("type", "string") == "string"
        }
        assert texts <= set(spec.text_limits), (spec.name, texts - set(spec.text_limits))


def test_a_limit_on_a_field_that_is_no_text_or_on_no_setting_is_refused_when_features_load() -> None:
    async def handler(ctx, tool_input):  # pragma: no cover - never called
        return {}

    schema = {"type": "object", "properties": {"n": {"type": "integer"}, "s": {"type": "string"}}}
    not_text = ToolSpec("t", "", schema, handler, text_limits={"n": TextLimit(chars=3, name="N")})
    no_setting = ToolSpec("t", "", schema, handler, text_limits={"s": TextLimit(setting=("nope", "x"))})
    from sessions_app.engine.contract import Feature

    with pytest.raises(ValueError, match="not a text field"):
        FeatureSet([Feature(name="f", tools=[not_text])])
    with pytest.raises(ValueError, match="no integer setting"):
        FeatureSet([Feature(name="f", tools=[no_setting])])


def test_the_tools_shown_to_the_model_carry_no_limit() -> None:
    for spec in features().tools:
        assert "maxLength" not in json.dumps(spec.definition())


# -- through a turn: refused, nothing stored or announced -------------------------------------------
@sync_to_async
def stored(session_id: str) -> dict:
    key = uuid.UUID(session_id)
    return {
        "events": list(SessionEvent.objects.filter(session_id=key).values_list("type", flat=True)),
        "tasks": Task.objects.filter(session_id=key).count(),
        "children": AgentSession.objects.filter(parent_session_id=key).count(),
        "notepad": AgentSession.objects.values_list("notepad", flat=True).get(pk=key),
    }


def error_of(frames: list[dict]) -> str:
    (result,) = [f for f in frames if f["type"] == "tool.result"]
    assert result["is_error"] is True
    return str(result["content"])


@pytest.mark.django_db(transaction=True)
async def test_an_end_task_summary_over_its_setting_is_refused_and_the_task_stays_open(
    connect, fake_anthropic
):
    fake_anthropic.enqueue(
        tool_use("begin_task", {"name": "survey"}),
        tool_use("end_task", {"summary": "s" * 101}),
        text("done"),
    )
    client = await connect()
    session = await client.create(model=MODEL, settings={"tasks": {"summary_max_chars": 100}})
    frames = await turn(client, "go")
    results = [f for f in frames if f["type"] == "tool.result"]
    assert [r["is_error"] for r in results] == [False, True]
    assert "over its limit of 100 (the session setting tasks.summary_max_chars)" in results[1]["content"]
    now = await stored(session["id"])
    assert "task.ended" not in now["events"] and now["tasks"] == 1
    ended = await sync_to_async(
        Task.objects.filter(session_id=uuid.UUID(session["id"]), ended_at__isnull=False).count
    )()
    assert ended == 0


@pytest.mark.django_db(transaction=True)
async def test_the_default_summary_limit_refuses_a_long_summary(connect, fake_anthropic):
    fake_anthropic.enqueue(
        tool_use("begin_task", {"name": "survey"}),
        tool_use("end_task", {"summary": "s" * 200_000}),
        text("ok"),
    )
    client = await connect()
    session = await client.create(model=MODEL)
    frames = await turn(client, "go")
    assert "over its limit of 8,000 (the session setting tasks.summary_max_chars)" in error_of(
        [f for f in frames if f["type"] == "tool.result"][1:]
    )
    assert "task.ended" not in (await stored(session["id"]))["events"]
    assert frames[-1]["stop_reason"] == "end_turn"


@pytest.mark.django_db(transaction=True)
async def test_a_begin_task_goal_over_its_setting_is_refused_and_no_task_starts(connect, fake_anthropic):
    fake_anthropic.enqueue(tool_use("begin_task", {"name": "survey", "goal": "g" * 51}), text("ok"))
    client = await connect()
    session = await client.create(model=MODEL, settings={"tasks": {"goal_max_chars": 50}})
    frames = await turn(client, "go")
    assert "(the session setting tasks.goal_max_chars)" in error_of(frames)
    now = await stored(session["id"])
    assert now["tasks"] == 0 and "task.started" not in now["events"]


@pytest.mark.django_db(transaction=True)
async def test_a_spawn_task_over_its_setting_is_refused_and_no_child_is_made(connect, fake_anthropic):
    fake_anthropic.enqueue(tool_use("spawn_session", {"task": "t" * 41}), text("ok"))
    client = await connect()
    session = await client.create(model=MODEL, settings={"subsessions": {"task_max_chars": 40}})
    frames = await turn(client, "go")
    assert "(the session setting subsessions.task_max_chars)" in error_of(frames)
    now = await stored(session["id"])
    assert now["children"] == 0 and "session.spawned" not in now["events"]


@pytest.mark.django_db(transaction=True)
async def test_a_report_over_its_setting_is_refused_and_the_child_can_report_again(connect, strict_anthropic):
    strict_anthropic.default_reply = (
        Router()
        .on(child_on("Count."), report("r" * 31), report("31 rows"))
        .on(root, spawn("Count."), text("31 rows."))
    )
    client = await connect()
    session = await client.create(
        model=MODEL, settings={"scratchpad": {"enabled": False}, "subsessions": {"result_max_chars": 30}}
    )
    frames = await turn_of(client, session, "Delegate.")
    refused = [
        f for f in frames if f["type"] == "tool.result" and f["name"] == "report_result" and f["is_error"]
    ]
    assert len(refused) == 1 and "(the session setting subsessions.result_max_chars)" in refused[0]["content"]
    bodies = [r.body for r in strict_anthropic.requests if root(r.body) and not is_child(r.body)]
    last = bodies[-1]["messages"][-1]["content"][0]
    assert json.loads(last["content"])["result"] == "31 rows"


@pytest.mark.django_db(transaction=True)
async def test_a_notepad_write_over_the_notepads_size_is_refused_and_nothing_is_announced(
    connect, fake_anthropic
):
    fake_anthropic.enqueue(tool_use("write_notepad", {"content": "n" * (NOTEPAD_MAX_CHARS + 1)}), text("ok"))
    client = await connect()
    session = await client.create(model=MODEL)
    frames = await turn(client, "go")
    assert "(the notepad's size limit, NOTEPAD_MAX_CHARS)" in error_of(frames)
    now = await stored(session["id"])
    assert now["notepad"] is None and "notepad.updated" not in now["events"]


@pytest.mark.django_db(transaction=True)
async def test_a_scratchpad_ref_over_its_seed_limit_is_refused_and_nothing_is_announced(
    connect, fake_anthropic
):
    fake_anthropic.enqueue(
        tool_use("session_scratchpad", {"action": "refs.add", "ref": "r" * 2001}), text("ok")
    )
    client = await connect()
    session = await client.create(model=MODEL)
    frames = await turn(client, "go")
    assert error_of(frames).startswith("The ref is 2001 chars; a ref holds at most 2000")  # seed 003's
    assert "scratchpad.updated" not in (await stored(session["id"]))["events"]


class DefaultSettings:
    """What `TextLimit.limit` reads of a session: its settings, here the features' defaults."""

    def setting(self, *path: str):
        value = features().default_settings
        for key in path:
            value = value[key]
        return value


LIMITED = [(spec, name) for spec in features().tools for name in spec.text_limits]


@pytest.mark.parametrize(("spec", "field"), LIMITED, ids=[f"{s.name}.{n}" for s, n in LIMITED])
def test_each_limit_passes_a_text_at_it_and_refuses_one_character_more(spec, field) -> None:
    limit = spec.text_limits[field]
    most = limit.limit(DefaultSettings())
    limits = {field: (most, limit.named())}
    assert tool_input_text_check(limits, {field: "x" * most}, tool=spec.name) is None
    message = tool_input_text_check(limits, {field: "x" * (most + 1)}, tool=spec.name)
    assert message is not None and f"over its limit of {most:,} ({limit.named()})" in message


@pytest.mark.django_db
@pytest.mark.parametrize(
    "bad",
    [
        {"tasks": {"summary_max_chars": 0}},
        {"tasks": {"goal_max_chars": 100_001}},
        {"tasks": {"name_max_chars": "200"}},
        {"subsessions": {"task_max_chars": 400_001}},
        {"subsessions": {"result_max_chars": 0}},
    ],
)
def test_a_text_limit_setting_out_of_range_is_refused(bad) -> None:
    from sessions_app.engine import sessions as engine_sessions
    from sessions_app.validation import SpecError

    with pytest.raises(SpecError):
        engine_sessions.session_create(owner=None, settings=bad)
