"""Validation of what a client or operator asks a session to be (PROTOCOL.md, `session.create`).

Every function returns a clean value or raises `SpecError` with a code and a message that names
the offending field, so a client can fix its frame.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sessions_app.common.approvals import PolicyMapError, policy_map_check

TOOL_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
MAX_TITLE_CHARS = 200
MAX_MODEL_CHARS = 100
MAX_SYSTEM_PROMPT_CHARS = 400_000
MAX_CLIENT_TOOLS = 128
MAX_TOOL_DESCRIPTION_CHARS = 10_000
MIN_CONTEXT_WINDOW = 1_000
MAX_CONTEXT_WINDOW = 10_000_000


@dataclass(frozen=True)
class SettingsSchema:
    """What a session's settings may hold: a validation rule per leaf (`rules`) and the full
    defaults (`defaults`), the merge of every feature's (`engine.features.FeatureSet.settings_schema`:
    one source, no read site repeats a default)."""

    rules: Mapping[str, Any]
    defaults: Mapping[str, Any]


class SpecError(ValueError):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_leaf(path: str, rule: tuple, value: Any) -> Any:
    kind = rule[0]
    if kind == "optional":
        # ("optional", inner): null (no value, e.g. no limit) or a value `inner` accepts.
        if value is None:
            return None
        try:
            return _check_leaf(path, rule[1], value)
        except SpecError as exc:
            raise SpecError(exc.code, f"{exc.message}, or null") from None
    if kind == "bool":
        if not isinstance(value, bool):
            raise SpecError("invalid_settings", f"settings.{path} must be true or false")
    elif kind == "int":
        low, high = rule[1], rule[2]
        if not _is_int(value) or not low <= value <= high:
            raise SpecError("invalid_settings", f"settings.{path} must be an integer from {low} to {high}")
    elif kind == "number":
        low, high = rule[1], rule[2]
        if not (_is_int(value) or isinstance(value, float)) or not low <= value <= high:
            raise SpecError("invalid_settings", f"settings.{path} must be a number from {low} to {high}")
    elif kind == "choice" and value not in rule[1]:
        options = ", ".join(sorted(rule[1]))
        raise SpecError("invalid_settings", f"settings.{path} must be one of: {options}")
    return value


def _merge(path: str, rules: dict, defaults: dict, given: Any) -> dict:
    if not isinstance(given, dict):
        where = f"settings.{path}" if path else "settings"
        raise SpecError("invalid_settings", f"{where} must be an object")
    unknown = sorted(set(given) - set(rules))
    if unknown:
        prefix = f"settings.{path}." if path else "settings."
        raise SpecError("invalid_settings", f"unknown setting {prefix}{unknown[0]}")
    merged = copy.deepcopy(defaults)
    for key, value in given.items():
        sub_path = f"{path}.{key}" if path else key
        rule = rules[key]
        if isinstance(rule, dict):
            merged[key] = _merge(sub_path, rule, defaults[key], value)
        elif rule[0] == "policy_map":
            merged[key] = _policy_map_merge(sub_path, defaults.get(key), value)
        else:
            merged[key] = _check_leaf(sub_path, rule, value)
    return merged


def _policy_map_merge(path: str, base: Any, given: Any) -> dict[str, str]:
    """A tool approval map (`settings.approvals`: tool name or prefix* -> policy) with `given`'s
    entries laid over `base`'s; a null entry removes the tool's entry."""
    try:
        entries = policy_map_check(given, where=f"settings.{path}", nulls=True)
    except PolicyMapError as exc:
        raise SpecError("invalid_settings", str(exc)) from None
    merged = dict(base) if isinstance(base, dict) else {}
    for key, policy in entries.items():
        if policy is None:
            merged.pop(key, None)
        else:
            merged[key] = policy
    return merged


def settings_clean(given: Any, *, schema: SettingsSchema, base: dict | None = None) -> dict:
    """Validate a (partial) settings object and return the full one, defaults filled in.

    With `base`, the given keys change an existing full settings object (an operator's edit).
    """
    defaults = base if base is not None else schema.defaults
    return _merge("", dict(schema.rules), dict(defaults), {} if given is None else given)


def settings_overlay(base: Any, given: Any) -> Any:
    """`given` (a partial settings object) laid over `base` as given, not filled with defaults:
    a nested object's keys change those of the same object in `base`, any other value replaces
    what `base` holds. What an agent stores for its sessions (their own day's defaults go under
    it); `settings_clean` then checks the result."""
    if not isinstance(base, dict) or not isinstance(given, dict):
        return copy.deepcopy(given)
    merged = copy.deepcopy(base)
    for key, value in given.items():
        merged[key] = settings_overlay(merged.get(key), value) if isinstance(value, dict) else value
    return merged


def client_tools_clean(tools: Any, *, reserved_names: Iterable[str]) -> list[dict]:
    """Validate client tool definitions: [{name, description, input_schema}]."""
    if not isinstance(tools, list):
        raise SpecError("invalid_tools", "tools must be a list of {name, description, input_schema}")
    if len(tools) > MAX_CLIENT_TOOLS:
        raise SpecError("invalid_tools", f"at most {MAX_CLIENT_TOOLS} client tools")
    reserved = set(reserved_names)
    seen: set[str] = set()
    cleaned: list[dict] = []
    for index, tool in enumerate(tools):
        where = f"tools[{index}]"
        if not isinstance(tool, dict):
            raise SpecError("invalid_tools", f"{where} must be an object")
        unknown = sorted(set(tool) - {"name", "description", "input_schema"})
        if unknown:
            raise SpecError("invalid_tools", f"{where} has an unknown field {unknown[0]}")
        name = tool.get("name")
        if not isinstance(name, str) or not TOOL_NAME_RE.match(name):
            raise SpecError("invalid_tools", f"{where}.name must match ^[a-zA-Z0-9_-]{{1,64}}$")
        if name in reserved:
            raise SpecError("invalid_tools", f"{where}.name {name!r} is a built-in tool of this session")
        if name in seen:
            raise SpecError("invalid_tools", f"{where}.name {name!r} is given twice")
        seen.add(name)
        description = tool.get("description", "")
        if not isinstance(description, str) or len(description) > MAX_TOOL_DESCRIPTION_CHARS:
            raise SpecError(
                "invalid_tools",
                f"{where}.description must be a string of at most {MAX_TOOL_DESCRIPTION_CHARS}",
            )
        schema = tool.get("input_schema")
        if not isinstance(schema, dict) or schema.get("type") != "object":
            raise SpecError(
                "invalid_tools", f'{where}.input_schema must be a JSON schema with "type": "object"'
            )
        cleaned.append({"name": name, "description": description, "input_schema": schema})
    return cleaned


def session_fields_clean(
    *,
    title: Any = None,
    model: Any = None,
    system_prompt: Any = None,
    context_window: Any = None,
    compact_threshold: Any = None,
) -> dict:
    """Range checks of session.create's scalar fields; None means 'use the default'."""
    clean: dict[str, Any] = {}
    if title is not None:
        if not isinstance(title, str) or len(title) > MAX_TITLE_CHARS:
            raise SpecError(
                "invalid_value", f"title must be a string of at most {MAX_TITLE_CHARS} characters"
            )
        clean["title"] = title
    if model is not None:
        if not isinstance(model, str) or not 0 < len(model) <= MAX_MODEL_CHARS:
            raise SpecError("invalid_value", f"model must be a non-empty string of at most {MAX_MODEL_CHARS}")
        clean["model"] = model
    if system_prompt is not None:
        if not isinstance(system_prompt, str) or len(system_prompt) > MAX_SYSTEM_PROMPT_CHARS:
            raise SpecError(
                "invalid_value", f"system_prompt must be a string of at most {MAX_SYSTEM_PROMPT_CHARS}"
            )
        clean["system_prompt"] = system_prompt
    if context_window is not None:
        if not _is_int(context_window) or not MIN_CONTEXT_WINDOW <= context_window <= MAX_CONTEXT_WINDOW:
            raise SpecError(
                "invalid_value",
                f"context_window must be an integer from {MIN_CONTEXT_WINDOW} to {MAX_CONTEXT_WINDOW}",
            )
        clean["context_window"] = context_window
    if compact_threshold is not None:
        if (
            isinstance(compact_threshold, bool)
            or not isinstance(compact_threshold, int | float)
            or not 0 < compact_threshold <= 1
        ):
            raise SpecError("invalid_value", "compact_threshold must be a number above 0 and at most 1")
        clean["compact_threshold"] = float(compact_threshold)
    return clean


def session_create_clean(
    *,
    title: Any = None,
    model: Any = None,
    system_prompt: Any = None,
    context_window: Any = None,
    compact_threshold: Any = None,
    tools: Any = None,
    settings: Any = None,
    settings_schema: SettingsSchema,
    reserved_tool_names: Iterable[str] = (),
) -> dict[str, Any]:
    """Every field of `session.create`, checked before anything is looked up or stored
    (PROTOCOL.md v1.1: a `model` over MAX_MODEL_CHARS is `invalid_value` before anything else).

    Returns the clean scalar fields (as `session_fields_clean`) plus `settings` (full, defaults
    filled in) and `tools`; raises `SpecError` naming the first bad field.
    """
    clean = session_fields_clean(
        title=title,
        model=model,
        system_prompt=system_prompt,
        context_window=context_window,
        compact_threshold=compact_threshold,
    )
    clean["settings"] = settings_clean(settings, schema=settings_schema)
    clean["tools"] = client_tools_clean(
        tools if tools is not None else [], reserved_names=reserved_tool_names
    )
    return clean
