"""An operator looks after an agent's authored tools on the dashboard: the list on the agent's
page, a tool's code at any version with the diff of its code, a restore (a new version, under the
conflict rule), and the on/off switch, which changes what the agent's sessions are offered."""

from __future__ import annotations

import pytest
from django.urls import reverse

from sessions_app import services
from sessions_app.agent_knowledge_selectors import agent_tools_list
from sessions_app.models import Agent, AgentTool
from tests.dashboard.agent_data import agent_new

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def url(name: str, agent: Agent, *args: object) -> str:
    return reverse(f"dashboard:{name}", args=[agent.pk, *args])


def switch(client, agent: Agent, name: str, data: dict):
    return client.post(url("agent_tool_switch", agent, name), data, **HX)


def define(agent: Agent, code: str, *, name: str = "double", description: str = "Doubles n.") -> AgentTool:
    return services.agent_tool_define(
        agent_id=agent.pk,
        name=name,
        description=description,
        input_schema=SCHEMA,
        code=code,
        author="agent:s1",
    )


def test_the_agent_page_lists_its_tools_with_their_switch(operator_client):
    agent = agent_new()
    define(agent, "def run(args, session):\n    return args['n'] * 2\n", description="Doubles <n>.")
    html = operator_client.get(reverse("dashboard:agent", args=[agent.pk])).content.decode()
    assert 'id="agent-tools"' in html and 'data-tool="double"' in html
    assert "Doubles &lt;n&gt;." in html and "Doubles <n>." not in html
    assert url("agent_tool", agent, "double") in html and url("agent_tool_switch", agent, "double") in html


def test_a_tool_page_shows_its_code_escaped_and_the_diff_between_versions(operator_client):
    agent = agent_new()
    define(agent, "def run(args, session):\n    return '<b>' * args['n']\n")
    define(agent, "def run(args, session):\n    return args['n'] * 2\n")
    page = operator_client.get(url("agent_tool", agent, "double"), {"version": 2}).content.decode()
    assert 'Tool <span class="mono">double</span>' in page
    assert "return args[&#x27;n&#x27;] * 2" in page
    assert "&lt;b&gt;" in page and "<b>' *" not in page  # the old line, in the diff, escaped
    assert "&quot;required&quot;" in page  # the input schema
    old = operator_client.get(url("agent_tool", agent, "double"), {"version": 1}).content.decode()
    assert url("agent_tool_restore", agent, "double", 1) in old and 'name="base_version" value="2"' in old


def test_a_tool_version_is_restored_as_a_new_version_and_a_stale_page_changes_nothing(operator_client):
    agent = agent_new()
    define(agent, "def run(args, session):\n    return 1\n")
    define(agent, "def run(args, session):\n    return 2\n")
    stale = operator_client.post(url("agent_tool_restore", agent, "double", 1), {"base_version": 1}, **HX)
    assert stale.status_code == 409 and AgentTool.objects.get(agent=agent).version == 2
    done = operator_client.post(url("agent_tool_restore", agent, "double", 1), {"base_version": 2}, **HX)
    assert done["HX-Redirect"].endswith("?version=3")
    tool = AgentTool.objects.get(agent=agent)
    assert (tool.version, tool.code) == (3, "def run(args, session):\n    return 1\n")
    missing = operator_client.post(url("agent_tool_restore", agent, "double", 9), {"base_version": 3}, **HX)
    assert missing.status_code == 404


def test_a_removed_tool_keeps_its_versions_and_comes_back_by_a_restore(operator_client):
    agent = agent_new()
    define(agent, "def run(args, session):\n    return 1\n")
    services.agent_tool_remove(agent_id=agent.pk, name="double", author="agent:s1")
    page = operator_client.get(url("agent_tool", agent, "double"), {"version": 1}).content.decode()
    assert "Removed by the agent" in page and 'name="base_version" value="0"' in page
    assert (
        operator_client.post(
            url("agent_tool_restore", agent, "double", 2), {"base_version": 0}, **HX
        ).status_code
        == 409
    )  # version 2 is the removal
    assert (
        operator_client.post(
            url("agent_tool_restore", agent, "double", 1), {"base_version": 0}, **HX
        ).status_code
        == 200
    )
    assert AgentTool.objects.get(agent=agent).version == 3


def test_the_switch_takes_a_tool_out_of_what_the_sessions_are_offered_and_back(operator_client):
    agent = agent_new()
    define(agent, "def run(args, session):\n    return 1\n")
    off = switch(operator_client, agent, "double", {"enabled": "off"})
    assert off.status_code == 200 and "double is off" in off.content.decode()
    assert agent_tools_list(agent_id=agent.pk, enabled_only=True) == []
    tool = AgentTool.objects.get(agent=agent)
    assert (tool.enabled, tool.switched_by, tool.version) == (False, "operator:op", 1)  # not a version
    assert switch(operator_client, agent, "double", {"enabled": "on"}).status_code == 200
    assert [t.name for t in agent_tools_list(agent_id=agent.pk, enabled_only=True)] == ["double"]


def test_a_switch_without_a_state_or_for_no_tool_changes_nothing(operator_client):
    agent = agent_new()
    define(agent, "def run(args, session):\n    return 1\n")
    assert switch(operator_client, agent, "double", {}).status_code == 422
    assert (
        operator_client.post(
            url("agent_tool_switch", agent, "double"), {"enabled": "maybe"}, **HX
        ).status_code
        == 422
    )
    assert switch(operator_client, agent, "nope", {"enabled": "off"}).status_code == 404
    assert AgentTool.objects.get(agent=agent).enabled is True


def test_tool_pages_need_an_operator(client):
    agent = agent_new()
    define(agent, "def run(args, session):\n    return 1\n")
    assert client.get(url("agent_tool", agent, "double")).status_code in (302, 403)
    assert client.post(url("agent_tool_switch", agent, "double"), {"enabled": "off"}).status_code in (
        302,
        403,
    )
    assert AgentTool.objects.get(agent=agent).enabled is True
