"""The dashboard's forms: they parse what the operator typed; services decide what is valid."""

from __future__ import annotations

import json
from typing import Any

from django import forms

from memory_app.scratchpad.models import ScratchpadSpace
from sessions_app.validation import (
    MAX_CONTEXT_WINDOW,
    MAX_MODEL_CHARS,
    MAX_SYSTEM_PROMPT_CHARS,
    MAX_TITLE_CHARS,
    MIN_CONTEXT_WINDOW,
)

# One message an operator types; a client's frame may be larger, but a browser form need not be.
MESSAGE_MAX_CHARS = 200_000
OBSERVATION_MODES = ("head", "tail", "range", "lines", "grep")


def _lf(text: str) -> str:
    # Browsers submit a textarea's line breaks as CRLF; what the agent wrote uses "\n".
    return text.replace("\r\n", "\n")


class SessionCreateForm(forms.Form):
    title = forms.CharField(required=False, max_length=MAX_TITLE_CHARS)
    model = forms.CharField(required=False, max_length=MAX_MODEL_CHARS)
    system_prompt = forms.CharField(
        required=False,
        max_length=MAX_SYSTEM_PROMPT_CHARS,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 3}),
    )
    context_window = forms.IntegerField(
        required=False, min_value=MIN_CONTEXT_WINDOW, max_value=MAX_CONTEXT_WINDOW
    )
    compact_threshold = forms.FloatField(required=False, min_value=0.01, max_value=1.0)
    settings = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": '{"notepad": {"position": "message"}}'}),
        help_text="Optional session settings as JSON (PROTOCOL.md); defaults fill the rest.",
    )

    def clean_system_prompt(self) -> str:
        return _lf(self.cleaned_data.get("system_prompt") or "")

    def clean_settings(self) -> dict | None:
        raw = (self.cleaned_data.get("settings") or "").strip()
        if not raw:
            return None
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(
                f"Not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})."
            ) from exc
        if not isinstance(value, dict):
            raise forms.ValidationError("Settings are a JSON object.")
        return value

    def session_fields(self) -> dict[str, Any]:
        """The cleaned values as `services.session_create` takes them (None: its default)."""
        data = self.cleaned_data
        return {
            "title": data.get("title") or None,
            "model": data.get("model") or None,
            "system_prompt": data.get("system_prompt") or None,
            "context_window": data.get("context_window"),
            "compact_threshold": data.get("compact_threshold"),
            "settings": data.get("settings"),
        }


class MessageForm(forms.Form):
    content = forms.CharField(
        max_length=MESSAGE_MAX_CHARS,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 2, "placeholder": "Message the agent (Ctrl+Enter sends)"}),
    )

    def clean_content(self) -> str:
        content = _lf(self.cleaned_data["content"])
        if not content.strip():
            raise forms.ValidationError("Write something first.")
        return content


class NotepadForm(forms.Form):
    content = forms.CharField(required=False, strip=False, widget=forms.Textarea(attrs={"rows": 14}))
    # The version the operator's editor started from: a notepad that moved on is a conflict.
    base_version = forms.IntegerField(min_value=0, widget=forms.HiddenInput)

    def clean_content(self) -> str:
        return _lf(self.cleaned_data.get("content") or "")


class ScratchpadSpaceForm(forms.Form):
    space = forms.ChoiceField(choices=ScratchpadSpace.choices, widget=forms.HiddenInput)
    value = forms.CharField(required=False, strip=False, widget=forms.Textarea(attrs={"rows": 6}))
    base_version = forms.IntegerField(min_value=0, widget=forms.HiddenInput)

    def space_value(self) -> str | list[str]:
        """The value as the space holds it: text, or for refs one ref a line."""
        text = _lf(self.cleaned_data.get("value") or "")
        if self.cleaned_data["space"] == ScratchpadSpace.REFS:
            return [line.strip() for line in text.split("\n") if line.strip()]
        return text


class ObservationReadForm(forms.Form):
    mode = forms.ChoiceField(choices=[(m, m) for m in OBSERVATION_MODES], initial="head")
    n = forms.IntegerField(required=False, min_value=1)
    start = forms.IntegerField(required=False, min_value=0)
    end = forms.IntegerField(required=False, min_value=1)
    start_line = forms.IntegerField(required=False, min_value=1)
    end_line = forms.IntegerField(required=False, min_value=1)
    pattern = forms.CharField(required=False, strip=False)
    context = forms.IntegerField(required=False, min_value=0)

    def read_arguments(self) -> dict[str, Any]:
        """The read's arguments, as `scratchpad_read` takes them (unset ones left out)."""
        return {k: v for k, v in self.cleaned_data.items() if k != "mode" and v not in (None, "")}
