"""Agents (DESIGN.md, "Agents: what outlives a session"): a named, lasting identity whose
sessions share its knowledge. Core data: the agent websocket, the dashboard, the admin and the
HTTP API read them, and the knowledge feature's tools change them, all through
`sessions_app.services` and `sessions_app.selectors`. Registered with Django by `models.py`.

Nothing is edited in place without a version: every change of the instructions, the learned text
or a skill is an `AgentVersion` row with its author, and the agent (or skill) row holds the
current text and its version number.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone

# DESIGN.md: 1-64 characters, lowercase letters, digits, `-` and `_`; unique per owner.
AGENT_NAME_MAX_CHARS = 64


class Agent(models.Model):
    """An agent of one client (its token's name: a rotated token of the same name keeps it), or
    of the operators (`owner_name` ""), with its instructions, its learned text, and the model
    and settings its sessions start from."""

    owner_name = models.CharField(max_length=100, blank=True, default="")
    name = models.CharField(max_length=AGENT_NAME_MAX_CHARS)
    # The operator's or client's system prompt: never editable by the model.
    instructions = models.TextField(blank=True, default="")
    instructions_version = models.PositiveIntegerField(default=1)
    # The model's own part of its system prompt (`edit_system_prompt`): version 0 until written.
    learned = models.TextField(blank=True, default="")
    learned_version = models.PositiveIntegerField(default=0)
    # Its sessions' defaults: "" for the server's default model; settings as given (validated, not
    # filled with defaults), merged over the features' defaults and under a session's own.
    model = models.CharField(max_length=100, blank=True, default="")
    settings = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["owner_name", "name"]
        constraints = [models.UniqueConstraint(fields=["owner_name", "name"], name="agent_unique_name")]

    def __str__(self) -> str:
        return f"{self.name} ({self.owner_name or 'operators'})"


class AgentPart(models.TextChoices):
    INSTRUCTIONS = "instructions", "Instructions"
    LEARNED = "learned", "Learned text"
    SKILL = "skill", "Skill"
    TOOL = "tool", "Authored tool"


class AgentVersion(models.Model):
    """One version of a part of an agent: its instructions, its learned text, a skill (by name)
    or an authored tool (by name), as it was after the change, with who made it. A deleted skill
    or tool is a version with `deleted` set. Diffs are computed between consecutive versions."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="versions")
    part = models.CharField(max_length=16, choices=AgentPart.choices)
    # The skill's or tool's name; "" for the instructions and the learned text.
    name = models.CharField(max_length=AGENT_NAME_MAX_CHARS, blank=True, default="")
    version = models.PositiveIntegerField()
    content = models.TextField(blank=True, default="")
    # A skill's description, a tool's description, schema and code: what the part holds besides.
    extra = models.JSONField(default=dict, blank=True)
    deleted = models.BooleanField(default=False)
    # `agent:<session id>`, `operator:<username>`, `client:<token name>`.
    author = models.CharField(max_length=200)
    # What the version restored, when it is a restore.
    restored_from = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["agent_id", "part", "name", "version"]
        constraints = [
            models.UniqueConstraint(fields=["agent", "part", "name", "version"], name="agent_version_unique")
        ]

    def __str__(self) -> str:
        what = f"{self.part} {self.name}".strip()
        return f"{what} v{self.version} of {self.agent_id}"


class AgentSkill(models.Model):
    """A skill of an agent as it is now (agentskills.io: a name, a description, a markdown body).
    Its history is its `AgentVersion` rows (part `skill`, this name)."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="skills")
    name = models.CharField(max_length=AGENT_NAME_MAX_CHARS)
    description = models.CharField(max_length=1024)
    content = models.TextField(blank=True, default="")
    version = models.PositiveIntegerField()
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["agent_id", "name"]
        constraints = [models.UniqueConstraint(fields=["agent", "name"], name="agent_skill_unique_name")]

    def __str__(self) -> str:
        return f"skill {self.name} v{self.version}"


class AgentStateEntry(models.Model):
    """One key of an agent's lasting key-value store (`agent_state`): read on demand, never in
    the prompt. `version` strictly increases with each set of the key."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="state")
    key = models.CharField(max_length=200)
    value = models.JSONField(null=True)
    version = models.PositiveBigIntegerField()
    author = models.CharField(max_length=200)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["agent_id", "key"]
        constraints = [models.UniqueConstraint(fields=["agent", "key"], name="agent_state_unique_key")]

    def __str__(self) -> str:
        return f"state {self.key} v{self.version}"


class AgentTool(models.Model):
    """A tool the agent wrote for itself (DESIGN.md, "Agent-authored tools") as it is now: a
    name, a description and an input schema (what the model is shown), and Python code defining
    `run(args, session)`, run in the code sandbox. Its history is its `AgentVersion` rows (part
    `tool`, this name: `content` the code, `extra` the description and schema). `enabled` is an
    operator's switch, not a version: a disabled tool is offered to no session."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="tools")
    name = models.CharField(max_length=AGENT_NAME_MAX_CHARS)
    description = models.CharField(max_length=1024)
    input_schema = models.JSONField(default=dict)
    code = models.TextField()
    version = models.PositiveIntegerField()
    enabled = models.BooleanField(default=True)
    # Who last switched it on or off (`operator:<username>`), "" while never switched.
    switched_by = models.CharField(max_length=200, blank=True, default="")
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["agent_id", "name"]
        constraints = [models.UniqueConstraint(fields=["agent", "name"], name="agent_tool_unique_name")]

    def __str__(self) -> str:
        return f"tool {self.name} v{self.version}"


class AgentMcpServer(models.Model):
    """An MCP server an operator attached to an agent (DESIGN.md, MCP): its tools are offered to
    every session of the agent, after the service's servers. `config` is the checked
    configuration (`agent_mcp_rules`: `{"command", "args", "env"}` or `{"url"}`); its env values
    are secrets, never shown. Written only by operators (the dashboard, the admin), through
    `services.agent_mcp_server_set` / `agent_mcp_server_remove`."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="mcp_servers")
    name = models.CharField(max_length=32)
    config = models.JSONField(default=dict)
    enabled = models.BooleanField(default=True)
    # The operator who last changed it: `operator:<username>`.
    author = models.CharField(max_length=200)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["agent_id", "name"]
        constraints = [models.UniqueConstraint(fields=["agent", "name"], name="agent_mcp_server_unique_name")]

    def __str__(self) -> str:
        return f"MCP server {self.name} of {self.agent_id}"
