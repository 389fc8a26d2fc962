"""A server tool's input, checked against its `input_schema` before its handler runs.

`tool_input_check(schema, value, tool=...)` is None when `value` matches the schema, else one
message the model can read and act on: it names the field (`"limit"`, `"items[2]"`, `"a.b"`) and
what the field must be. `tool_dispatch` runs it before every server tool's handler; a call that
does not match gets the message as its tool_result (is_error) and its handler never runs. A
handler can therefore rely on the types, required fields, choices and bounds its schema states,
and checks only what a schema cannot say (a text that must not be blank, a bound taken from the
session's settings, which field an action needs).

The subset of JSON Schema our tool schemas use, checked exactly (it is not a general validator,
and needs no dependency):
- `type`: one of object, string, integer, number, boolean, array. An integer is a whole JSON
  number (3, not 3.0 nor true: stricter than JSON Schema, as the handlers count and slice with
  it); a number is any JSON number but true and false;
- `properties` and `required` of an object, `items` of an array (one schema for every item);
- `enum` (a value equal to one of the choices, of the same JSON type);
- `minimum` and `maximum` (inclusive) of an integer or a number;
- annotations, which check nothing: `description`, `default`, `title`, `examples`.
Any other keyword (`additionalProperties`, `maxLength`, `pattern`, `oneOf`, ...) is refused when
the features load (`tool_schema_unsupported`), so that no schema promises the model a check that
is not made. Fields an object's `properties` do not name are allowed, as JSON Schema allows them.

A field given as null counts as not given: models sometimes send every field, the unused ones as
null. A required field that is null is missing; an optional one is left to the handler's default.

`tool_input_text_check(limits, value, tool=...)` then bounds the length of the input's text
fields (`ToolSpec.text_limits`: a limit per field, taken from the session's settings or a named
constant). The limits are not put in the schema as `maxLength`: the schema is what the model is
shown, identical in every session so that the tools block stays cached, while a limit may differ
per session.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["tool_input_check", "tool_input_text_check", "tool_schema_unsupported"]

TYPES = ("object", "string", "integer", "number", "boolean", "array")
ANNOTATIONS = frozenset({"description", "default", "title", "examples"})
KEYWORDS = frozenset({"type", "properties", "required", "items", "enum", "minimum", "maximum"}) | ANNOTATIONS

# What a value of each type is called in a message, alone and in the plural ("an array of strings").
_NAMES = {
    "object": ("an object", "objects"),
    "string": ("a string", "strings"),
    "integer": ("an integer", "integers"),
    "number": ("a number", "numbers"),
    "boolean": ("true or false", "booleans"),
    "array": ("an array", "arrays"),
}
# The longest rendering of a wrong value in a message (a choice of an enum may be sent a page).
SHOWN_VALUE_MAX_CHARS = 60
# Said after every refusal: the handler did not run, so nothing changed.
NOT_RUN = "Nothing was done; correct the call and make it again."


@dataclass(frozen=True)
class _Problem:
    path: str  # the field: "limit", "items[2]", "filters.kind"; "" for the input itself
    expected: str  # what it must be: "an integer from 1 to 100"
    got: str | None  # what it is: "0", "a string"; None when the field is missing


def tool_input_check(schema: Mapping[str, Any], value: Any, *, tool: str | None = None) -> str | None:
    """None when `value` matches `schema` (the subset above); else the message for the model,
    naming `tool` (the tool's name) when given."""
    problem = _check(schema, value, "")
    if problem is None:
        return None
    if problem.got is None:
        text = f'{tool or "This call"} needs "{problem.path}": {problem.expected}.'
    elif problem.path:
        prefix = f"{tool}: " if tool else ""
        text = f'{prefix}"{problem.path}" must be {problem.expected}, not {problem.got}.'
    else:
        text = f"{tool or 'The tool'}'s input must be {problem.expected}, not {problem.got}."
    return f"{text} {NOT_RUN}"


def tool_input_text_check(
    limits: Mapping[str, tuple[int, str]], value: Any, *, tool: str | None = None
) -> str | None:
    """None when every text field named in `limits` (field → (most characters, the limit's name))
    is within its limit; else the message for the model: the field, its length, the limit and
    its name. A field holding an array is checked item by item. Runs after `tool_input_check`."""
    if not isinstance(value, Mapping):
        return None
    for name, (most, named) in limits.items():
        given = value.get(name)
        texts = list(enumerate(given)) if isinstance(given, list | tuple) else [(None, given)]
        for index, text in texts:
            if isinstance(text, str) and len(text) > most:
                path = name if index is None else f"{name}[{index}]"
                prefix = f"{tool}: " if tool else ""
                return (
                    f'{prefix}"{path}" is {len(text):,} characters, over its limit of {most:,} '
                    f"({named}). Nothing was done; make it shorter and make the call again."
                )
    return None


def tool_text_limits_unsupported(schema: Mapping[str, Any], fields: Any) -> list[str]:
    """The fields of `fields` (a tool's `text_limits`) that name no text field of the input
    `schema` (a string, or an array of strings); empty when each names one."""
    properties = schema.get("properties") or {}
    problems = []
    for name in fields:
        sub = properties.get(name) or {}
        kind = sub.get("type")
        if kind == "array":
            kind = (sub.get("items") or {}).get("type", "string")
        if kind != "string":
            problems.append(f"text_limits: {name!r} is not a text field")
    return problems


def tool_schema_unsupported(schema: Any, where: str = "input_schema") -> list[str]:
    """What of `schema` the checker does not check (keywords outside the subset, unknown
    types), as `where.path: keyword`; empty when it checks all of it."""
    if not isinstance(schema, Mapping):
        return [f"{where} is not an object"]
    problems = [f"{where}: {key!r}" for key in schema if key not in KEYWORDS]
    if "type" in schema and schema["type"] not in TYPES:
        problems.append(f"{where}: type {schema['type']!r}")
    for name, sub in (schema.get("properties") or {}).items():
        problems += tool_schema_unsupported(sub, f"{where}.properties.{name}")
    if "items" in schema:
        problems += tool_schema_unsupported(schema["items"], f"{where}.items")
    return problems


def _type_of(value: Any) -> str:
    """The JSON type of a value decoded from JSON."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return "null"


def _is(kind: str, value: Any) -> bool:
    actual = _type_of(value)
    return actual == kind or (kind == "number" and actual == "integer")


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= SHOWN_VALUE_MAX_CHARS else text[: SHOWN_VALUE_MAX_CHARS - 1] + "…"


def _got(value: Any) -> str:
    kind = _type_of(value)
    return "null" if kind == "null" else _NAMES[kind][0]


def _same(choice: Any, value: Any) -> bool:
    # 1 == True in Python, not in JSON.
    return choice == value and _type_of(choice) == _type_of(value)


def _expected(schema: Mapping[str, Any]) -> str:
    """What a value of `schema` must be, in words: "an integer from 1 to 100"."""
    if "enum" in schema:
        return "one of " + ", ".join(c if isinstance(c, str) else _shown(c) for c in schema["enum"])
    kind = schema.get("type")
    if kind is None:
        return "a value"
    words = _NAMES[kind][0]
    if kind == "array" and "items" in schema and "type" in schema["items"]:
        words += " of " + _NAMES[schema["items"]["type"]][1]
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is not None and high is not None:
        words += f" from {low} to {high}"
    elif low is not None:
        words += f" of at least {low}"
    elif high is not None:
        words += f" of at most {high}"
    return words


def _check(schema: Mapping[str, Any], value: Any, path: str) -> _Problem | None:
    kind = schema.get("type")
    if "enum" in schema:
        if not any(_same(choice, value) for choice in schema["enum"]):
            return _Problem(path, _expected(schema), _shown(value))
        return None
    if kind is not None and not _is(kind, value):
        return _Problem(path, _expected(schema), _got(value))
    if kind in ("integer", "number"):
        low, high = schema.get("minimum"), schema.get("maximum")
        if (low is not None and value < low) or (high is not None and value > high):
            return _Problem(path, _expected(schema), _shown(value))
    if "items" in schema and _is("array", value):
        for index, item in enumerate(value):
            problem = _check(schema["items"], item, f"{path}[{index}]")
            if problem is not None:
                return problem
    if _is("object", value):
        properties = schema.get("properties") or {}
        for name in schema.get("required") or ():
            if value.get(name) is None:
                sub = properties.get(name) or {}
                return _Problem(_field(path, name), _expected(sub), None)
        for name, sub in properties.items():
            if value.get(name) is not None:
                problem = _check(sub, value[name], _field(path, name))
                if problem is not None:
                    return problem
    return None


def _field(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name
