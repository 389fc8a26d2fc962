"""The forms of an agent's knowledge as an operator edits it: the learned text, a skill, a zip of
skills, a state entry. They parse what was typed or uploaded; the services decide what is valid
(the limits, the names) and whether the version the form opened at is still current
(`base_version`, the conflict rule)."""

from __future__ import annotations

import json
from typing import Any

from django import forms

from sessions_app.agent_knowledge_rules import (
    SKILL_CONTENT_MAX_CHARS,
    SKILL_DESCRIPTION_MAX_CHARS,
    SKILL_NAME_MAX_CHARS,
    STATE_KEY_MAX_CHARS,
    STATE_VALUE_MAX_BYTES,
)
from sessions_app.agent_skill_files import SKILL_ZIP_MAX_BYTES
from sessions_app.dashboard.forms import newlines_lf

# The largest learned text a form takes: the `knowledge.learned_max_chars` setting may not go
# past this (the knowledge feature's LEARNED_MAX_CHARS_LIMIT); the agent's own limit is the
# service's to check.
LEARNED_FORM_MAX_CHARS = 100_000
# A state value as typed: its JSON may be pretty-printed, so the text may be longer than the
# compact JSON the limit counts (which the service checks).
STATE_VALUE_FORM_MAX_CHARS = 4 * STATE_VALUE_MAX_BYTES


class BaseVersionForm(forms.Form):
    """A delete or restore: the version the operator saw (0: none)."""

    base_version = forms.IntegerField(min_value=0, widget=forms.HiddenInput)


class ToolSwitchForm(forms.Form):
    """An authored tool switched on or off: the state asked for, never implied by a missing field."""

    enabled = forms.TypedChoiceField(
        choices=[("on", "on"), ("off", "off")], coerce=lambda value: value == "on"
    )


class LearnedForm(BaseVersionForm):
    learned = forms.CharField(
        required=False,
        strip=False,
        max_length=LEARNED_FORM_MAX_CHARS,
        widget=forms.Textarea(attrs={"rows": 12}),
    )

    def clean_learned(self) -> str:
        return newlines_lf(self.cleaned_data.get("learned") or "")


class SkillForm(BaseVersionForm):
    """A skill as the operator wrote it; `base_version` 0 for a new one."""

    name = forms.CharField(
        max_length=SKILL_NAME_MAX_CHARS,
        help_text="1–64: lowercase letters, digits and single hyphens",
        widget=forms.TextInput(attrs={"autocomplete": "off", "placeholder": "weekly-report"}),
    )
    description = forms.CharField(
        max_length=SKILL_DESCRIPTION_MAX_CHARS,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Shown in every session's ## Skills list (1–1,024 characters).",
    )
    content = forms.CharField(
        required=False,
        strip=False,
        max_length=SKILL_CONTENT_MAX_CHARS,
        label="Body (markdown)",
        widget=forms.Textarea(attrs={"rows": 14}),
    )

    def clean_description(self) -> str:
        return newlines_lf(self.cleaned_data.get("description") or "")

    def clean_content(self) -> str:
        return newlines_lf(self.cleaned_data.get("content") or "")


class SkillImportForm(forms.Form):
    archive = forms.FileField(label="A zip of NAME/SKILL.md folders")

    def clean_archive(self) -> Any:
        upload = self.cleaned_data["archive"]
        if upload.size > SKILL_ZIP_MAX_BYTES:
            raise forms.ValidationError(
                f"The zip is {upload.size:,} bytes; at most {SKILL_ZIP_MAX_BYTES:,} (SKILL_ZIP_MAX_BYTES)."
            )
        return upload


class StateForm(BaseVersionForm):
    """A state entry: its key and its value as JSON text; `base_version` 0 for a new key."""

    key = forms.CharField(max_length=STATE_KEY_MAX_CHARS, strip=False)
    value = forms.CharField(
        strip=False,
        max_length=STATE_VALUE_FORM_MAX_CHARS,
        label="Value (JSON)",
        widget=forms.Textarea(attrs={"rows": 8, "spellcheck": "false"}),
    )

    def clean_value(self) -> Any:
        raw = self.cleaned_data.get("value") or ""
        try:
            return json.loads(raw)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(
                f"Not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})."
            ) from None


class StateKeyForm(forms.Form):
    """Which entry an editor opens (none: a new key)."""

    key = forms.CharField(required=False, max_length=STATE_KEY_MAX_CHARS, strip=False)


class StateDeleteForm(BaseVersionForm):
    key = forms.CharField(max_length=STATE_KEY_MAX_CHARS, strip=False)
