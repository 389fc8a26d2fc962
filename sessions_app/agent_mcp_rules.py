"""The rules of an MCP server's configuration (DESIGN.md, "Models from more than one provider":
MCP), written once for every place that takes one: the service's `PALIMPSEST_MCP_SERVERS` (checked
when the settings load), an agent's servers (the dashboard's form, the admin, the services).

A configuration is operators' data only, never a client's or a model's: a stdio server is a
command the service runs. Its shape is one of
- `{"command": "...", "args": ["..."], "env": {"NAME": "value"}}` (stdio; `args` and `env`
  optional), or
- `{"url": "http(s)://..."}` (streamable HTTP).
Anything else is refused with a message naming what is wrong. The `env` values are secrets: they
are masked wherever a configuration is shown (`mcp_config_masked`) and never reach a model.

A pure module (no models, no Django settings): `config.settings` checks the service's servers
with it while the settings load.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MCP_SERVER_NAME_RE",
    "McpConfigError",
    "McpServerConfig",
    "mcp_config_masked",
    "mcp_server_config_clean",
    "mcp_servers_parse",
]

# A server's name becomes part of each of its tools' names (`mcp__<server>__<tool>`).
MCP_SERVER_NAME_RE = re.compile(r"^[a-z0-9_-]{1,32}$")
MCP_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
MCP_COMMAND_MAX_CHARS = 1024
MCP_ARGS_MAX = 64
MCP_ARG_MAX_CHARS = 4096
MCP_ENV_MAX = 64
MCP_ENV_VALUE_MAX_CHARS = 8192
MCP_URL_MAX_CHARS = 2048
# The most servers one place configures (the service's, or one agent's).
MCP_SERVERS_MAX = 32
# How an env value is shown: never the value itself.
MASKED = "••••••"

_STDIO_KEYS = frozenset({"command", "args", "env"})
_HTTP_KEYS = frozenset({"url"})


class McpConfigError(ValueError):
    """A configuration that cannot be used; the message names the field and what it must be."""


@dataclass(frozen=True)
class McpServerConfig:
    """One server, checked: `command` (with `args` and `env`) for stdio, or `url`."""

    name: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    url: str = ""

    @property
    def transport(self) -> str:
        return "stdio" if self.command else "http"

    def as_json(self) -> dict[str, Any]:
        """The configuration as stored and as given (without the name)."""
        if self.url:
            return {"url": self.url}
        return {"command": self.command, "args": list(self.args), "env": dict(self.env)}

    @property
    def key(self) -> str:
        """A stable digest of the whole configuration, secrets included: a change of any of it is
        another server (the old process is stopped, a new one started). Never shown."""
        text = json.dumps([self.name, self.as_json()], sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def secrets(self) -> tuple[str, ...]:
        """The env values, which nothing shown to a model, a client or a log may contain."""
        return tuple(value for _, value in self.env if value)


def mcp_config_masked(config: McpServerConfig) -> dict[str, Any]:
    """What an operator's page shows of a configuration: the env's names, not its values."""
    shown = config.as_json()
    if "env" in shown:
        shown["env"] = dict.fromkeys(shown["env"], MASKED)
    return shown


def _text(value: Any, field: str, most: int, *, blank: bool = False) -> str:
    if not isinstance(value, str):
        raise McpConfigError(f"{field} must be a string.")
    if not blank and not value.strip():
        raise McpConfigError(f"{field} must not be empty.")
    if len(value) > most:
        raise McpConfigError(f"{field} is {len(value):,} characters, over its limit of {most:,}.")
    if "\x00" in value:
        raise McpConfigError(f"{field} must not contain a NUL character.")
    return value


def mcp_server_config_clean(name: Any, raw: Any) -> McpServerConfig:
    """`raw` (a parsed JSON object) checked as the server `name`'s configuration; raises
    `McpConfigError` naming what is wrong."""
    if not isinstance(name, str) or not MCP_SERVER_NAME_RE.match(name):
        raise McpConfigError(
            f"The server name {name!r} must be 1 to 32 characters: lowercase letters, digits, - and _."
        )
    where = f"The server {name!r}"
    if not isinstance(raw, Mapping):
        raise McpConfigError(f'{where} must be an object: {{"command", "args", "env"}} or {{"url"}}.')
    keys = set(raw)
    if "url" in keys and "command" in keys:
        raise McpConfigError(f'{where} has both "command" and "url": give one.')
    allowed = _HTTP_KEYS if "url" in keys else _STDIO_KEYS
    unknown = sorted(keys - allowed)
    if unknown:
        raise McpConfigError(f"{where} has unknown fields {unknown}; it takes {sorted(allowed)}.")
    if "url" in keys:
        url = _text(raw["url"], f'{where}: "url"', MCP_URL_MAX_CHARS)
        if not re.match(r"^https?://[^\s/]+", url):
            raise McpConfigError(f'{where}: "url" must be an http:// or https:// address.')
        return McpServerConfig(name=name, url=url)
    if "command" not in keys:
        raise McpConfigError(f'{where} needs "command" (stdio) or "url" (streamable HTTP).')
    command = _text(raw["command"], f'{where}: "command"', MCP_COMMAND_MAX_CHARS)
    args = raw.get("args", [])
    if not isinstance(args, list):
        raise McpConfigError(f'{where}: "args" must be an array of strings.')
    if len(args) > MCP_ARGS_MAX:
        raise McpConfigError(f'{where}: "args" has {len(args)} items, over its limit of {MCP_ARGS_MAX}.')
    checked_args = tuple(
        _text(arg, f'{where}: "args[{i}]"', MCP_ARG_MAX_CHARS, blank=True) for i, arg in enumerate(args)
    )
    env = raw.get("env", {})
    if not isinstance(env, Mapping):
        raise McpConfigError(f'{where}: "env" must be an object of names to strings.')
    if len(env) > MCP_ENV_MAX:
        raise McpConfigError(f'{where}: "env" has {len(env)} names, over its limit of {MCP_ENV_MAX}.')
    pairs = []
    for key in sorted(env, key=str):
        if not isinstance(key, str) or not MCP_ENV_NAME_RE.match(key):
            raise McpConfigError(f'{where}: "env" has a bad name {key!r} (letters, digits and _).')
        # The value is never quoted in a message: it may be a secret.
        pairs.append((key, _text(env[key], f'{where}: "env.{key}"', MCP_ENV_VALUE_MAX_CHARS, blank=True)))
    return McpServerConfig(name=name, command=command, args=checked_args, env=tuple(pairs))


def mcp_servers_parse(value: Any, *, where: str = "PALIMPSEST_MCP_SERVERS") -> tuple[McpServerConfig, ...]:
    """A name → configuration object (the service's setting), checked; raises `McpConfigError`
    with a message that starts with `where`."""
    if isinstance(value, str):
        try:
            value = json.loads(value or "{}")
        except ValueError as exc:
            raise McpConfigError(f"{where} is not JSON: {exc}") from None
    if not isinstance(value, Mapping):
        raise McpConfigError(f"{where} must be a JSON object: server name -> configuration.")
    if len(value) > MCP_SERVERS_MAX:
        raise McpConfigError(f"{where} names {len(value)} servers, over its limit of {MCP_SERVERS_MAX}.")
    try:
        return tuple(mcp_server_config_clean(name, raw) for name, raw in sorted(value.items()))
    except McpConfigError as exc:
        raise McpConfigError(f"{where}: {exc}") from None
