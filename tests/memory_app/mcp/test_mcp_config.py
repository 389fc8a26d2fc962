"""An MCP server's configuration: checked once for every place (the service's setting, refused at
start with a clear message; an agent's, written by operators only), tool names within the
providers' rule, input schemas the engine checks as far as it can."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from memory_app.mcp.names import mcp_tool_name
from memory_app.mcp.schemas import checked_schema
from sessions_app import services
from sessions_app.agent_mcp_rules import MASKED, McpConfigError, mcp_config_masked, mcp_servers_parse
from sessions_app.common.tool_input import tool_input_check, tool_schema_unsupported
from sessions_app.models import AgentMcpServer
from tests.dashboard.agent_data import agent_new

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("not json", "is not JSON"),
        ("[]", "must be a JSON object"),
        ('{"Bad Name": {"command": "x"}}', "must be 1 to 32 characters"),
        ('{"t": {"command": "x", "url": "http://h"}}', 'both "command" and "url"'),
        ('{"t": {"args": ["a"]}}', 'needs "command"'),
        ('{"t": {"command": "x", "cwd": "/"}}', "unknown fields ['cwd']"),
        ('{"t": {"command": "x", "args": "a b"}}', '"args" must be an array'),
        ('{"t": {"command": "x", "env": {"A": 1}}}', '"env.A" must be a string'),
        ('{"t": {"url": "ftp://h"}}', "http:// or https://"),
        ('{"t": {"command": ""}}', "must not be empty"),
    ],
)
def test_a_bad_service_setting_is_refused_with_a_message(value: str, message: str) -> None:
    with pytest.raises(McpConfigError, match=re.escape(message)):
        mcp_servers_parse(value)


def test_a_bad_setting_stops_the_start_with_improperly_configured() -> None:
    env = {**os.environ, "PALIMPSEST_DEV": "1", "PALIMPSEST_MCP_SERVERS": '{"t": {"url": "ftp://x"}}'}
    run = subprocess.run(
        [sys.executable, "-c", "import config.settings"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert run.returncode != 0
    assert "ImproperlyConfigured: PALIMPSEST_MCP_SERVERS: The server 't'" in run.stderr


def test_a_good_setting_parses_and_masks_its_env() -> None:
    (server,) = mcp_servers_parse('{"t": {"command": "run", "args": ["-v"], "env": {"KEY": "hush"}}}')
    assert (server.transport, server.args, server.env) == ("stdio", ("-v",), (("KEY", "hush"),))
    assert mcp_config_masked(server) == {"command": "run", "args": ["-v"], "env": {"KEY": MASKED}}


def test_the_error_never_quotes_an_env_value() -> None:
    with pytest.raises(McpConfigError) as caught:
        mcp_servers_parse({"t": {"command": "x", "env": {"KEY": "v" * 9000}}})
    assert "vvvv" not in str(caught.value)


@pytest.mark.django_db
def test_only_an_operator_attaches_a_server() -> None:
    agent = agent_new()
    for author in ("agent", "agent:123", "client:someone"):
        with pytest.raises(McpConfigError, match="Only an operator"):
            services.agent_mcp_server_set(agent_id=agent.pk, name="t", config={"command": "x"}, author=author)
    assert not AgentMcpServer.objects.exists()
    row = services.agent_mcp_server_set(
        agent_id=agent.pk, name="t", config={"command": "x"}, author="operator:a"
    )
    assert row.config == {"command": "x", "args": [], "env": {}}
    with pytest.raises(McpConfigError):
        services.agent_mcp_server_set(
            agent_id=agent.pk, name="t", config={"url": "nope"}, author="operator:a"
        )
    assert AgentMcpServer.objects.get().config == {"command": "x", "args": [], "env": {}}


def test_names_keep_to_the_rule_and_are_stable() -> None:
    assert mcp_tool_name("git", "git_status") == "mcp__git__git_status"
    assert mcp_tool_name("s", "a.b c/d") == "mcp__s__a_b_c_d"
    long = mcp_tool_name("server", "x" * 100)
    assert len(long) == 64 and re.match(r"^[a-zA-Z0-9_-]{1,64}$", long)
    assert long == mcp_tool_name("server", "x" * 100) != mcp_tool_name("server", "x" * 101)


def test_a_schema_is_checked_as_far_as_the_checker_reaches() -> None:
    schema = {
        "type": "object",
        "title": "logArguments",
        "properties": {
            "repo_path": {"type": "string", "title": "Repo Path"},
            "max_count": {"type": "integer", "default": 10, "minimum": 1},
            "since": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
            "files": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        },
        "required": ["repo_path"],
        "additionalProperties": False,
    }
    checked = checked_schema(schema)
    assert tool_schema_unsupported(checked) == []
    assert tool_input_check(checked, {"repo_path": "/r", "since": "yesterday", "files": ["a"]}) is None
    assert "repo_path" in (tool_input_check(checked, {"max_count": 3}) or "")
    assert "max_count" in (tool_input_check(checked, {"repo_path": "/r", "max_count": 0}) or "")


@pytest.mark.django_db
def test_the_admin_writes_through_the_services_and_masks_env(admin_client) -> None:
    from django.urls import reverse

    agent = agent_new()
    add = reverse("admin:sessions_app_agentmcpserver_add")
    config = '{"command": "run", "env": {"KEY": "hush-hush"}}'
    response = admin_client.post(add, {"agent": agent.pk, "name": "t", "config": config, "enabled": "on"})
    assert response.status_code == 302, response.content.decode()[:2000]
    row = AgentMcpServer.objects.get()
    assert (row.config["env"], row.author) == ({"KEY": "hush-hush"}, "operator:admin")
    change = reverse("admin:sessions_app_agentmcpserver_change", args=[row.pk])
    assert "hush-hush" not in admin_client.get(change).content.decode()
    masked = '{"command": "run2", "env": {"KEY": "' + MASKED + '"}}'
    assert admin_client.post(change, {"config": masked, "enabled": "on"}).status_code == 302
    row.refresh_from_db()
    assert (row.config["command"], row.config["env"]) == ("run2", {"KEY": "hush-hush"})
    bad = admin_client.post(add, {"agent": agent.pk, "name": "u", "config": '{"url": "x"}', "enabled": "on"})
    assert bad.status_code == 200 and AgentMcpServer.objects.count() == 1
