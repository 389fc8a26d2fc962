"""The API's bodies and responses (pydantic, through django-ninja): what the OpenAPI document
describes. A request body takes only its own fields (`extra="forbid"`: another is a 400
`invalid_value`) with their JSON types (`strict`); their ranges and rules are checked below, by the
engine and the services, as for the websocket. A response may hold fields added after this was
written (PROTOCOL.md: the contract changes only by adding), so responses allow extra fields."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class Out(BaseModel):
    model_config = ConfigDict(extra="allow")


class Error(Out):
    code: str
    message: str


# -- sessions ---------------------------------------------------------------
class Spend(Out):
    """What a session and the sessions below it spent (what its budget counts); `cost_usd` is
    null when no model of it has a price."""

    input_tokens: int
    output_tokens: int
    cost_usd: float | None


class SessionOut(Out):
    """A session's public state (`session` in the websocket's `session.state`)."""

    id: str
    title: str
    model: str
    system_prompt: str
    context_window: int
    compact_threshold: float
    tools: list[dict[str, Any]]
    settings: dict[str, Any]
    status: str
    agent: str | None
    epoch: int
    last_seq: int
    last_prompt_tokens: int | None
    turn_id: str | None
    created_at: str
    last_activity_at: str
    server_tools: list[str]
    provider: str
    sandbox: bool
    parent_session_id: str | None
    root_session_id: str
    depth: int
    spend: Spend


class ApprovalIn(Body):
    """The answer to a call that waits for an approval (as `tool.approve`)."""

    input_sha256: str | None = None


class DenialIn(ApprovalIn):
    """As `tool.deny`: `reason` is shown to the model with the tool error."""

    reason: str | None = None


class ToolCallApprovalOut(Out):
    """A tool call's approval once answered."""

    tool_use_id: str
    name: str
    input: dict[str, Any]
    input_sha256: str
    approval: str
    reason: str
    author: str


class SessionPage(Out):
    items: list[SessionOut]
    next: str | None


class SessionPatch(Body):
    """As `session.update`: None (or absent) leaves a field as it is; `settings` are merged."""

    title: str | None = None
    context_window: int | None = None
    compact_threshold: float | None = None
    settings: dict[str, Any] | None = None


class EventOut(Out):
    """A stored event, as the websocket sends it: its own fields besides these."""

    type: str
    session_id: str
    seq: int
    ts: str


class EventPage(Out):
    items: list[EventOut]
    next: str | None


# -- agents -----------------------------------------------------------------
class SkillSummary(Out):
    name: str
    description: str
    version: int


class AgentToolSummary(Out):
    name: str
    description: str
    version: int


class AgentVersions(Out):
    instructions: int
    learned: int


class AgentOut(Out):
    """An agent's public state (`agent` in the websocket's `agent.state`)."""

    name: str
    instructions: str
    learned: str
    model: str | None
    settings: dict[str, Any]
    skills: list[SkillSummary]
    tools: list[AgentToolSummary]
    versions: AgentVersions
    created_at: str


class AgentPage(Out):
    items: list[AgentOut]
    next: str | None


class AgentCreate(Body):
    name: str
    system_prompt: str | None = None
    model: str | None = None
    settings: dict[str, Any] | None = None


class AgentPatch(Body):
    """`system_prompt` replaces the instructions (a new version); `model` and `settings` change
    what its sessions start from (`settings` laid over the agent's own)."""

    system_prompt: str | None = None
    model: str | None = None
    settings: dict[str, Any] | None = None


class VersionOut(Out):
    version: int
    content: str
    author: str
    created_at: str
    restored_from: int | None


class VersionPage(Out):
    items: list[VersionOut]
    next: str | None


# -- skills and state -------------------------------------------------------
class SkillOut(Out):
    name: str
    description: str
    content: str
    version: int


class SkillPage(Out):
    items: list[SkillSummary]
    next: str | None


class SkillPut(Body):
    description: str
    content: str


class SkillsImported(Out):
    imported: list[SkillSummary]


class StateOut(Out):
    key: str
    value: Any
    version: int


class StatePage(Out):
    items: list[StateOut]
    next: str | None


class StatePut(Body):
    """`value` is any JSON; with `expected_version` (0: the key must not exist yet) the key must be
    at that version, else 409 and nothing changes."""

    value: Any
    expected_version: int | None = None
