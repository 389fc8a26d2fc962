"""An agent's authored tools as data (DESIGN.md, "Agent-authored tools"): the rules, each
definition, removal and restore a version, the operator's switch, the selectors and the agent's
public state. Nothing is stored on a refusal. Runs on SQLite and, with DATABASE_URL, PostgreSQL."""

from __future__ import annotations

import uuid

import pytest

from sessions_app import services
from sessions_app.agent_knowledge_rules import AGENT_TOOLS_MAX, TOOL_CODE_MAX_BYTES, AgentKnowledgeError
from sessions_app.agent_knowledge_selectors import agent_tool_get, agent_tool_versions, agent_tools_list
from sessions_app.agent_models import Agent, AgentPart, AgentTool, AgentVersion
from sessions_app.agent_selectors import agent_public_state
from sessions_app.dashboard.selectors.agents import agent_part_history
from sessions_app.models import AgentSession, SessionEvent

pytestmark = pytest.mark.django_db

CODE = "def run(args, session):\n    return {'n': len(args.get('text', ''))}\n"
SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
AUTHOR = "agent:test"


@pytest.fixture
def agent() -> Agent:
    return Agent.objects.create(owner_name="client", name="helper")


def define(agent: Agent, name: str = "word_len", **fields: object) -> AgentTool:
    given = {"description": "Count.", "input_schema": SCHEMA, "code": CODE, "author": AUTHOR, **fields}
    return services.agent_tool_define(agent_id=agent.pk, name=name, **given)  # type: ignore[arg-type]


def stored(agent: Agent) -> tuple[int, int]:
    return (
        AgentTool.objects.filter(agent=agent).count(),
        AgentVersion.objects.filter(agent=agent, part=AgentPart.TOOL).count(),
    )


def test_a_definition_is_a_row_and_its_first_version(agent: Agent) -> None:
    row = define(agent)
    assert (row.name, row.version, row.enabled) == ("word_len", 1, True)
    version = AgentVersion.objects.get(agent=agent, part=AgentPart.TOOL, name="word_len")
    assert version.content == CODE
    assert version.extra == {"description": "Count.", "input_schema": SCHEMA}
    assert version.author == AUTHOR


def test_a_redefinition_is_a_new_version_and_replaces_the_row(agent: Agent) -> None:
    define(agent)
    row = define(agent, description="Count again.", code=CODE + "# v2\n")
    assert row.version == 2
    assert agent_tool_get(agent_id=agent.pk, name="word_len").code.endswith("# v2\n")
    assert stored(agent) == (1, 2)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"name": "Word"}, "not a valid tool name"),
        ({"name": "1abc"}, "not a valid tool name"),
        ({"name": "a-b"}, "not a valid tool name"),
        ({"name": "x" * 65}, "at most 64"),
        ({"description": " "}, "needs a description"),
        ({"description": "d" * 1025}, "at most 1,024"),
        ({"input_schema": {"type": "string"}}, '"type": "object"'),
        ({"input_schema": []}, '"type": "object"'),
        ({"input_schema": {"type": "object", "additionalProperties": False}}, "additionalProperties"),
        (
            {"input_schema": {"type": "object", "properties": {"s": {"type": "string", "pattern": "a"}}}},
            "pattern",
        ),
        ({"input_schema": {"type": "object", "properties": []}}, "properties is not an object"),
        ({"input_schema": {"type": "object", "required": "text"}}, "required is not a list"),
        ({"code": "def run(args, session)\n    return 1\n"}, "does not compile (line 1)"),
        ({"code": "def helper(args, session):\n    return 1\n"}, "def run(args, session)"),
        ({"code": "async def run(args, session):\n    return 1\n"}, "def run(args, session)"),
        ({"code": "def run(args):\n    return 1\n"}, "def run(args, session)"),
        ({"code": "if True:\n    def run(args, session):\n        return 1\n"}, "def run(args, session)"),
        ({"code": "x" * (TOOL_CODE_MAX_BYTES + 1)}, "TOOL_CODE_MAX_BYTES"),
        ({"code": "é" * (TOOL_CODE_MAX_BYTES // 2 + 1)}, "bytes of UTF-8"),
    ],
)
def test_a_definition_that_breaks_a_rule_stores_nothing(agent: Agent, fields: dict, message: str) -> None:
    name = fields.pop("name", "word_len")
    with pytest.raises(AgentKnowledgeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        define(agent, name, **fields)
    assert stored(agent) == (0, 0)


def test_the_code_is_compiled_not_run(agent: Agent, tmp_path: object) -> None:
    marker = f"/tmp/palimpsest-never-{uuid.uuid4().hex}"
    code = f"open({marker!r}, 'w').write('ran')\ndef run(args, session):\n    return 1\n"
    define(agent, code=code)
    import os

    assert not os.path.exists(marker)


def test_a_name_of_a_reserved_tool_is_refused(agent: Agent) -> None:
    with pytest.raises(AgentKnowledgeError, match="may not shadow"):
        define(agent, "read_notepad", reserved_names={"read_notepad", "lookup"})
    assert stored(agent) == (0, 0)


def test_a_run_with_defaults_or_varargs_is_accepted(agent: Agent) -> None:
    define(agent, "a", code="def run(args, session, extra=1):\n    return extra\n")
    define(agent, "b", code="def run(*call):\n    return len(call)\n")
    assert [t.name for t in agent_tools_list(agent_id=agent.pk)] == ["a", "b"]


def test_at_most_the_limit_of_tools_and_a_redefinition_still_passes(agent: Agent) -> None:
    for index in range(3):
        define(agent, f"t{index}", max_tools=3)
    with pytest.raises(AgentKnowledgeError, match="already has 3 tools"):
        define(agent, "t3", max_tools=3)
    assert define(agent, "t0", max_tools=3).version == 2
    assert AGENT_TOOLS_MAX == 32


def test_removal_keeps_the_versions_and_records_a_deletion(agent: Agent) -> None:
    define(agent)
    removed = services.agent_tool_remove(agent_id=agent.pk, name="word_len", author=AUTHOR)
    assert (removed.version, removed.deleted) == (2, True)
    assert stored(agent) == (0, 2)
    with pytest.raises(AgentKnowledgeError, match='no tool named "word_len". Its tools: none yet'):
        services.agent_tool_remove(agent_id=agent.pk, name="word_len", author=AUTHOR)


def test_a_change_made_by_a_session_is_announced_on_it(agent: Agent) -> None:
    session = AgentSession.objects.create(model="scripted", context_window=200_000, agent=agent)
    define(agent, session_id=session.pk)
    services.agent_tool_remove(agent_id=agent.pk, name="word_len", author=AUTHOR, session_id=session.pk)
    events = SessionEvent.objects.filter(session=session, type="agent.updated").order_by("seq")
    assert [(e.payload["part"], e.payload["name"], e.payload["version"]) for e in events] == [
        ("tool", "word_len", 1),
        ("tool", "word_len", 2),
    ]


def test_restore_defines_an_old_version_again_as_a_new_one(agent: Agent) -> None:
    define(agent)
    define(agent, code=CODE + "# v2\n", description="Second.")
    services.agent_tool_remove(agent_id=agent.pk, name="word_len", author=AUTHOR)
    row = services.agent_tool_restore(
        agent_id=agent.pk, name="word_len", version=1, author="operator:ann", expected_version=0
    )
    assert (row.version, row.code, row.description) == (4, CODE, "Count.")
    latest = AgentVersion.objects.get(agent=agent, part=AgentPart.TOOL, name="word_len", version=4)
    assert (latest.restored_from, latest.author) == (1, "operator:ann")


@pytest.mark.parametrize(
    ("version", "expected", "message"),
    [(3, None, "a removal"), (9, None, "not a version"), (1, 2, "at version 0")],
)
def test_a_restore_that_cannot_apply_stores_nothing(
    agent: Agent, version: int, expected: int | None, message: str
) -> None:
    define(agent)
    define(agent, code=CODE + "# v2\n")
    services.agent_tool_remove(agent_id=agent.pk, name="word_len", author=AUTHOR)
    before = stored(agent)
    with pytest.raises(AgentKnowledgeError, match=message):
        services.agent_tool_restore(
            agent_id=agent.pk, name="word_len", version=version, author=AUTHOR, expected_version=expected
        )
    assert stored(agent) == before


def test_a_restore_may_not_shadow_a_name_taken_since(agent: Agent) -> None:
    define(agent)
    with pytest.raises(AgentKnowledgeError, match="may not shadow"):
        services.agent_tool_restore(
            agent_id=agent.pk, name="word_len", version=1, author=AUTHOR, reserved_names={"word_len"}
        )


def test_the_operators_switch_is_no_version_and_survives_a_redefinition(agent: Agent) -> None:
    define(agent)
    services.agent_tool_enable(agent_id=agent.pk, name="word_len", enabled=False, author="operator:ann")
    assert agent_tools_list(agent_id=agent.pk, enabled_only=True) == []
    assert AgentTool.objects.get(agent=agent).switched_by == "operator:ann"
    define(agent, code=CODE + "# v2\n")
    assert stored(agent) == (1, 2)
    assert agent_tools_list(agent_id=agent.pk, enabled_only=True) == []
    services.agent_tool_enable(agent_id=agent.pk, name="word_len", enabled=True, author="operator:ann")
    assert [t.name for t in agent_tools_list(agent_id=agent.pk, enabled_only=True)] == ["word_len"]


def test_the_public_state_lists_the_enabled_tools_in_protocol_shape(agent: Agent) -> None:
    define(agent, "b_tool")
    define(agent, "a_tool", description="First.")
    services.agent_tool_enable(agent_id=agent.pk, name="b_tool", enabled=False, author="operator:ann")
    assert agent_public_state(agent=agent)["tools"] == [
        {"name": "a_tool", "description": "First.", "version": 1}
    ]


def test_the_versions_and_the_history_page_with_diffs(agent: Agent) -> None:
    define(agent)
    define(agent, code=CODE.replace("len", "sum"))
    services.agent_tool_remove(agent_id=agent.pk, name="word_len", author=AUTHOR)
    versions = agent_tool_versions(agent_id=agent.pk, name="word_len")
    assert [(v.version, v.deleted) for v in versions] == [(3, True), (2, False), (1, False)]
    assert versions[2].input_schema == SCHEMA
    history = agent_part_history(agent=agent, part=AgentPart.TOOL, name="word_len", version=2).history
    assert history.selected_version == 2
    assert any("sum" in line.text for line in history.diff.lines if line.kind == "added")
