"""The rules and limits of an agent's knowledge (DESIGN.md, "Agents: what outlives a session"):
skills in the agentskills.io format, the `agent_state` store and authored tools. Shared by the services that
write them, the selectors that read them, the knowledge feature's tools and the skill files'
import, so each rule is written once. Every check raises `AgentKnowledgeError` with a message
for whoever made the change (the model included) to act on.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Collection
from typing import Any

from sessions_app.common.tool_input import tool_schema_unsupported

# Skills (agentskills.io): a name, a description, a markdown body.
SKILL_NAME_MAX_CHARS = 64
SKILL_DESCRIPTION_MAX_CHARS = 1_024
SKILL_CONTENT_MAX_CHARS = 100_000
# Lowercase letters and digits in runs joined by single hyphens: none at either end, no "--".
SKILL_NAME_RE = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")

# `agent_state`: the agent's lasting key-value store.
STATE_KEY_MAX_CHARS = 200
STATE_VALUE_MAX_BYTES = 65_536
STATE_MAX_KEYS = 1_000
STATE_LIST_MAX_KEYS = 200


class AgentKnowledgeError(ValueError):
    """A change or read of an agent's knowledge that cannot be made (a bad name, a limit, an
    unknown skill or key): nothing changed. The message says what to do instead."""


class AgentStateConflict(AgentKnowledgeError):
    """`agent_state` set with an `expected_version` that is not the key's current version."""

    def __init__(self, message: str, *, version: int | None) -> None:
        super().__init__(message)
        self.version = version


class AgentSkillConflict(AgentKnowledgeError):
    """A skill written with an `expected_version` (an operator's edit names the version it
    started from) that is not its current one: nothing was overwritten."""

    def __init__(self, message: str, *, version: int | None) -> None:
        super().__init__(message)
        self.version = version


def skill_name_check(name: Any) -> str:
    """`name` if it is a valid skill name, else `AgentKnowledgeError`."""
    if not isinstance(name, str) or not name:
        raise AgentKnowledgeError("A skill needs a name (1-64 characters).")
    if len(name) > SKILL_NAME_MAX_CHARS:
        raise AgentKnowledgeError(
            f'The skill name "{name[:80]}" is {len(name)} characters long; at most '
            f"{SKILL_NAME_MAX_CHARS} (SKILL_NAME_MAX_CHARS)."
        )
    if not SKILL_NAME_RE.fullmatch(name):
        raise AgentKnowledgeError(
            f'"{name}" is not a valid skill name: use lowercase letters, digits and single hyphens, '
            'with no hyphen at either end (e.g. "weekly-report").'
        )
    return name


def skill_fields_check(*, name: Any, description: Any, content: Any) -> tuple[str, str, str]:
    """A skill's name, description and body if they keep the rules, else `AgentKnowledgeError`."""
    name = skill_name_check(name)
    if not isinstance(description, str) or not description.strip():
        raise AgentKnowledgeError(f'The skill "{name}" needs a description (1-1,024 characters).')
    if len(description) > SKILL_DESCRIPTION_MAX_CHARS:
        raise AgentKnowledgeError(
            f'The description of the skill "{name}" is {len(description):,} characters long; at most '
            f"{SKILL_DESCRIPTION_MAX_CHARS:,} (SKILL_DESCRIPTION_MAX_CHARS). Shorten it: it is shown "
            "in every session's ## Skills list; the details belong in the body."
        )
    if not isinstance(content, str):
        raise AgentKnowledgeError(f'The body of the skill "{name}" must be text (markdown).')
    if len(content) > SKILL_CONTENT_MAX_CHARS:
        raise AgentKnowledgeError(
            f'The body of the skill "{name}" is {len(content):,} characters long; at most '
            f"{SKILL_CONTENT_MAX_CHARS:,} (SKILL_CONTENT_MAX_CHARS). Split it into smaller skills."
        )
    return name, description, content


def state_key_check(key: Any) -> str:
    """`key` if it is a valid `agent_state` key (1-200 characters), else `AgentKnowledgeError`."""
    if not isinstance(key, str) or not key:
        raise AgentKnowledgeError('agent_state needs a "key" (1-200 characters) for this action.')
    if len(key) > STATE_KEY_MAX_CHARS:
        raise AgentKnowledgeError(
            f"The key is {len(key)} characters long; at most {STATE_KEY_MAX_CHARS} (STATE_KEY_MAX_CHARS)."
        )
    return key


def state_value_check(value: Any) -> None:
    """`AgentKnowledgeError` unless `value` is JSON of at most `STATE_VALUE_MAX_BYTES` bytes."""
    try:
        encoded = json.dumps(value, ensure_ascii=False, allow_nan=False).encode()
    except (TypeError, ValueError) as exc:
        raise AgentKnowledgeError(f"The value is not JSON: {exc}.") from None
    if len(encoded) > STATE_VALUE_MAX_BYTES:
        raise AgentKnowledgeError(
            f"The value is {len(encoded):,} bytes of JSON; at most {STATE_VALUE_MAX_BYTES:,} "
            "(STATE_VALUE_MAX_BYTES). Split it over several keys, or keep a summary."
        )


# ---------------------------------------------------------------------------
# Authored tools (DESIGN.md, "Agent-authored tools"): Python run in the code sandbox
# ---------------------------------------------------------------------------

# A tool's name: snake_case, as every built-in tool's, within what the Messages API accepts
# (`^[a-zA-Z0-9_-]{1,64}$`).
TOOL_NAME_MAX_CHARS = 64
TOOL_NAME_RE = re.compile(r"[a-z][a-z0-9_]*")
TOOL_DESCRIPTION_MAX_CHARS = 1_024
# The code sandbox's own limit on a program (memory_app.sandbox.limits.SANDBOX_MAX_CODE_BYTES,
# which the data layer does not import): one MiB of UTF-8.
TOOL_CODE_MAX_BYTES = 1024 * 1024
# The input schema as stored (its JSON): a schema is what every request of every session of the
# agent carries, so it stays small.
TOOL_SCHEMA_MAX_BYTES = 16_384
AGENT_TOOLS_MAX = 32
# The function the sandbox calls: `def run(args, session)` at the top of the code.
TOOL_ENTRY_POINT = "run"


def tool_name_check(name: Any, *, reserved: Collection[str] = ()) -> str:
    """`name` if it is a valid authored tool's name that shadows none of `reserved` (every static
    server tool of the process, the calling session's client tools), else `AgentKnowledgeError`."""
    if not isinstance(name, str) or not name:
        raise AgentKnowledgeError(f"A tool needs a name (1-{TOOL_NAME_MAX_CHARS} characters).")
    if len(name) > TOOL_NAME_MAX_CHARS:
        raise AgentKnowledgeError(
            f'The tool name "{name[:80]}" is {len(name)} characters long; at most '
            f"{TOOL_NAME_MAX_CHARS} (TOOL_NAME_MAX_CHARS)."
        )
    if not TOOL_NAME_RE.fullmatch(name):
        raise AgentKnowledgeError(
            f'"{name}" is not a valid tool name: use lowercase letters, digits and underscores, '
            'starting with a letter (e.g. "word_count").'
        )
    if name in reserved:
        raise AgentKnowledgeError(
            f'"{name}" is the name of a tool you already have (a built-in or a client tool): '
            "an authored tool may not shadow it. Choose another name."
        )
    return name


def tool_fields_check(
    *,
    name: Any,
    description: Any,
    input_schema: Any,
    code: Any,
    reserved: Collection[str] = (),
) -> tuple[str, str, dict, str]:
    """An authored tool's name, description, input schema and code if they keep the rules, else
    `AgentKnowledgeError`: the name (`tool_name_check`), a description of 1-1,024 characters, an
    object schema whose every keyword the engine's input check covers
    (`common.tool_input.tool_schema_unsupported`), of at most `TOOL_SCHEMA_MAX_BYTES`, and code
    of at most `TOOL_CODE_MAX_BYTES` that compiles and defines `def run(args, session)` at its
    top level. The code is compiled, never run."""
    name = tool_name_check(name, reserved=reserved)
    if not isinstance(description, str) or not description.strip():
        raise AgentKnowledgeError(
            f'The tool "{name}" needs a description (1-{TOOL_DESCRIPTION_MAX_CHARS:,} characters).'
        )
    if len(description) > TOOL_DESCRIPTION_MAX_CHARS:
        raise AgentKnowledgeError(
            f'The description of the tool "{name}" is {len(description):,} characters long; at most '
            f"{TOOL_DESCRIPTION_MAX_CHARS:,} (TOOL_DESCRIPTION_MAX_CHARS)."
        )
    _tool_schema_check(name, input_schema)
    _tool_code_check(name, code)
    return name, description, input_schema, code


def _tool_schema_check(name: str, schema: Any) -> None:
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise AgentKnowledgeError(
            f'The input_schema of the tool "{name}" must be a JSON Schema object with "type": "object" '
            '(e.g. {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}).'
        )
    problems = _schema_shape_problems(schema, "input_schema") or tool_schema_unsupported(schema)
    if problems:
        raise AgentKnowledgeError(
            f'The input_schema of the tool "{name}" uses what the input check does not support: '
            + "; ".join(problems[:10])
            + ". Use only type (object, string, integer, number, boolean, array), properties, "
            "required, items, enum, minimum, maximum, and the annotations description, default, "
            "title, examples."
        )
    size = len(json.dumps(schema, ensure_ascii=False).encode())
    if size > TOOL_SCHEMA_MAX_BYTES:
        raise AgentKnowledgeError(
            f'The input_schema of the tool "{name}" is {size:,} bytes of JSON; at most '
            f"{TOOL_SCHEMA_MAX_BYTES:,} (TOOL_SCHEMA_MAX_BYTES). Shorten its descriptions."
        )


def _tool_code_check(name: str, code: Any) -> None:
    if not isinstance(code, str) or not code.strip():
        raise AgentKnowledgeError(f'The tool "{name}" needs code: Python 3 defining run(args, session).')
    try:
        size = len(code.encode("utf-8"))
    except UnicodeEncodeError:
        raise AgentKnowledgeError(f'The code of the tool "{name}" is not valid Unicode text.') from None
    if size > TOOL_CODE_MAX_BYTES:
        raise AgentKnowledgeError(
            f'The code of the tool "{name}" is {size:,} bytes of UTF-8; at most '
            f"{TOOL_CODE_MAX_BYTES:,} (TOOL_CODE_MAX_BYTES)."
        )
    try:
        tree = ast.parse(code, filename=f"<tool {name}>", mode="exec")
        compile(tree, f"<tool {name}>", "exec", dont_inherit=True)
    except SyntaxError as exc:
        where = f" (line {exc.lineno})" if exc.lineno else ""
        raise AgentKnowledgeError(
            f'The code of the tool "{name}" does not compile{where}: {exc.msg}. Nothing was stored.'
        ) from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise AgentKnowledgeError(
            f'The code of the tool "{name}" does not compile: {type(exc).__name__}. Nothing was stored.'
        ) from None
    if not any(_is_entry_point(node) for node in tree.body):
        raise AgentKnowledgeError(
            f'The code of the tool "{name}" must define, at its top level, '
            f"def {TOOL_ENTRY_POINT}(args, session): the sandbox calls it with the tool's input "
            "(a dict) and the session (session.notepad), and what it returns (JSON) is the result."
        )


def _is_entry_point(node: ast.stmt) -> bool:
    """A top-level `def run(...)` (not async) that can be called with two positional arguments."""
    if not isinstance(node, ast.FunctionDef) or node.name != TOOL_ENTRY_POINT:
        return False
    params = [*node.args.posonlyargs, *node.args.args]
    required = len(params) - len(node.args.defaults)
    required_kw = [d for d in node.args.kw_defaults if d is None]
    return required <= 2 and (len(params) >= 2 or node.args.vararg is not None) and not required_kw


def _schema_shape_problems(schema: Any, where: str) -> list[str]:
    """What of `schema` is not shaped as the input check reads it (a `properties` that is not an
    object of schemas, a `required` that is not a list of names, ...); empty when all is."""
    if not isinstance(schema, dict):
        return [f"{where} is not an object"]
    problems = []
    kind = schema.get("type")
    if kind is not None and not isinstance(kind, str):
        problems.append(f"{where}.type is not a string (one type per schema)")
    properties = schema.get("properties", {})
    if not isinstance(properties, dict):
        problems.append(f"{where}.properties is not an object")
    else:
        for field, sub in properties.items():
            problems += _schema_shape_problems(sub, f"{where}.properties.{field}")
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        problems.append(f"{where}.required is not a list of property names")
    if "items" in schema:
        problems += _schema_shape_problems(schema["items"], f"{where}.items")
    if "enum" in schema and (not isinstance(schema["enum"], list) or not schema["enum"]):
        problems.append(f"{where}.enum is not a non-empty list")
    for bound in ("minimum", "maximum"):
        value = schema.get(bound)
        if bound in schema and (isinstance(value, bool) or not isinstance(value, int | float)):
            problems.append(f"{where}.{bound} is not a number")
    return problems
