"""The Agents section's forms: they parse what the operator typed; `engine.agents` and the
services decide what is valid (a name, a model, settings), as they do for a client's
`agent.create`."""

from __future__ import annotations

from typing import Any

from django import forms

from sessions_app.agent_models import AGENT_NAME_MAX_CHARS
from sessions_app.dashboard.forms import newlines_lf, settings_json
from sessions_app.recall_selectors import RECALL_QUERY_MAX_CHARS
from sessions_app.validation import MAX_MODEL_CHARS, MAX_SYSTEM_PROMPT_CHARS, SpecError

STATE_PREFIX_MAX_CHARS = 200  # DESIGN.md: a state key is at most 200 characters


class AgentCreateForm(forms.Form):
    """A new agent of the operators: its name, instructions, default model and settings."""

    name = forms.CharField(
        max_length=AGENT_NAME_MAX_CHARS,
        help_text="1–64 characters: lowercase letters, digits, - and _",
        widget=forms.TextInput(attrs={"autocomplete": "off", "placeholder": "report-auditor"}),
    )
    instructions = forms.CharField(
        required=False,
        strip=False,
        max_length=MAX_SYSTEM_PROMPT_CHARS,
        widget=forms.Textarea(attrs={"rows": 5, "placeholder": "You audit quarterly reports."}),
        help_text="Its sessions' system prompt, first; the model never edits it.",
    )
    model = forms.CharField(required=False, max_length=MAX_MODEL_CHARS, label="Default model")
    settings = forms.CharField(
        required=False,
        label="Default settings as JSON",
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": '{"notepad": {"position": "message"}}'}),
        help_text="Optional; a session's own settings are merged over these.",
    )

    def clean_instructions(self) -> str:
        return newlines_lf(self.cleaned_data.get("instructions") or "")

    def clean_settings(self) -> dict | None:
        return settings_json(self.cleaned_data.get("settings"))

    def agent_fields(self) -> dict[str, Any]:
        """The cleaned values as `engine.agents.agent_create` takes them (None: its default)."""
        data = self.cleaned_data
        return {
            "name": data["name"],
            "system_prompt": data.get("instructions") or None,
            "model": data.get("model") or None,
            "settings": data.get("settings"),
        }

    def add_spec_error(self, error: SpecError) -> None:
        """Show `agent_create`'s refusal on the field it is about (its message names it)."""
        if error.code == "invalid_settings":
            self.add_error("settings", error.message)
            return
        fields = {"agent name": "name", "model": "model", "system_prompt": "instructions"}
        field = next((f for start, f in fields.items() if error.message.startswith(start)), None)
        self.add_error(field, error.message)


class InstructionsForm(forms.Form):
    """The agent's instructions as the operator edited them; `base_version` is the version the
    editor opened at (a save that finds another one changes nothing)."""

    instructions = forms.CharField(
        required=False,
        strip=False,
        max_length=MAX_SYSTEM_PROMPT_CHARS,
        widget=forms.Textarea(attrs={"rows": 10}),
    )
    base_version = forms.IntegerField(min_value=1, widget=forms.HiddenInput)

    def clean_instructions(self) -> str:
        return newlines_lf(self.cleaned_data.get("instructions") or "")


class AgentListForm(forms.Form):
    page = forms.IntegerField(
        required=False, min_value=1, error_messages={"invalid": "page must be a whole number, 1 or more."}
    )


class StateQueryForm(forms.Form):
    """Which state keys to show: those starting with `key_prefix`, the page after the key `after`."""

    key_prefix = forms.CharField(required=False, max_length=STATE_PREFIX_MAX_CHARS, strip=False)
    after = forms.CharField(required=False, max_length=STATE_PREFIX_MAX_CHARS, strip=False)


class RecallSearchForm(forms.Form):
    """A search of what sessions said: plain words (never the database's query syntax)."""

    q = forms.CharField(max_length=RECALL_QUERY_MAX_CHARS, strip=True)
