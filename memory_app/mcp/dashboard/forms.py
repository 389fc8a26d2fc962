"""An agent's MCP server as an operator writes it: a name and its configuration as JSON
(`{"command", "args", "env"}` or `{"url"}`), checked by the rules every place shares
(`agent_mcp_rules`). In a change, an env value left as the mask keeps the value stored."""

from __future__ import annotations

import json
from typing import Any

from django import forms

from sessions_app.agent_mcp_rules import MASKED, McpConfigError, McpServerConfig, mcp_server_config_clean

CONFIG_FORM_MAX_CHARS = 64 * 1024


class McpServerForm(forms.Form):
    name = forms.CharField(max_length=32)
    config = forms.CharField(
        max_length=CONFIG_FORM_MAX_CHARS,
        widget=forms.Textarea(attrs={"rows": 6, "spellcheck": "false"}),
        help_text='{"command": "...", "args": ["..."], "env": {"NAME": "value"}} or {"url": "https://..."}',
    )
    enabled = forms.BooleanField(required=False, initial=True)

    def __init__(
        self,
        *args: Any,
        stored: dict[str, Any] | None = None,
        taken: frozenset[str] = frozenset(),
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        # The configuration stored under the name (a change), whose env values a mask keeps.
        self.stored = stored or {}
        self.taken = taken

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        name, text = cleaned.get("name"), cleaned.get("config")
        if name is None or text is None:
            return cleaned
        if name in self.taken:
            self.add_error("name", "The service has a server of that name: its tools would hide this one's.")
            return cleaned
        try:
            raw = json.loads(text)
        except ValueError as exc:
            self.add_error("config", f"Not JSON: {exc}")
            return cleaned
        if isinstance(raw, dict) and isinstance(raw.get("env"), dict):
            kept = self.stored.get("env") or {}
            raw["env"] = {k: (kept.get(k, "") if v == MASKED else v) for k, v in raw["env"].items()}
        try:
            cleaned["checked"] = mcp_server_config_clean(name, raw)
        except McpConfigError as exc:
            self.add_error("config", str(exc))
        return cleaned

    @property
    def checked(self) -> McpServerConfig:
        return self.cleaned_data["checked"]
