"""An MCP tool's input schema: shown to the model whole, and checked by the engine
(`common.tool_input`) as far as its subset of JSON Schema reaches (`ToolSpec.checked_schema`).
The server checks the rest itself and answers a bad call with an error the model reads."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sessions_app.common.tool_input import KEYWORDS, TYPES

_NUMBER = (int, float)


def checked_schema(schema: Any) -> dict[str, Any]:
    """What of `schema` the engine's check understands: the known keywords where their values
    are of the shape it expects, recursively; everything else dropped (a field whose type is a
    list or a union becomes "any value"). What is dropped the server checks itself; what is kept
    is checked as the engine checks every tool (a little more strictly than JSON Schema: an
    integer is not 3.0, and a required field given as null is missing)."""
    if not isinstance(schema, Mapping):
        return {}
    kept: dict[str, Any] = {}
    kind = schema.get("type")
    if isinstance(kind, str) and kind in TYPES:
        kept["type"] = kind
    if isinstance(schema.get("properties"), Mapping):
        kept["properties"] = {str(name): checked_schema(sub) for name, sub in schema["properties"].items()}
    required = schema.get("required")
    if isinstance(required, list) and all(isinstance(name, str) for name in required):
        kept["required"] = list(required)
    if isinstance(schema.get("items"), Mapping):
        kept["items"] = checked_schema(schema["items"])
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        kept["enum"] = list(schema["enum"])
    for bound in ("minimum", "maximum"):
        value = schema.get(bound)
        if (
            isinstance(value, _NUMBER)
            and not isinstance(value, bool)
            and kept.get("type")
            in (
                "integer",
                "number",
            )
        ):
            kept[bound] = value
    return {key: value for key, value in kept.items() if key in KEYWORDS}
