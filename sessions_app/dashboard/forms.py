"""The dashboard's forms: they parse what the operator typed; services decide what is valid."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django import forms

from sessions_app.budgets import BUDGET_SETTING, MAX_BUDGET_TOKENS, MAX_BUDGET_USD, budget_limits
from sessions_app.engine.features import features
from sessions_app.validation import (
    MAX_CONTEXT_WINDOW,
    MAX_MODEL_CHARS,
    MAX_SYSTEM_PROMPT_CHARS,
    MAX_TITLE_CHARS,
    MIN_CONTEXT_WINDOW,
    SpecError,
    settings_clean,
)

# One message an operator types; a client's frame may be larger, but a browser form need not be.
MESSAGE_MAX_CHARS = 200_000


def newlines_lf(text: str) -> str:
    """A textarea's text with the agent's line breaks: browsers submit CRLF, the agent writes "\\n"."""
    return text.replace("\r\n", "\n")


SETTING_PREFIX = "setting__"  # a generated field's name: setting__notepad__position


def _setting_field(rule: tuple, default: Any, label: str) -> forms.Field:
    """The form field of one setting's validation rule (`Feature.settings_rules`)."""
    kind = rule[0]
    if kind == "optional":
        # Null by default (e.g. no limit): the inner rule's field, left empty.
        low, high = rule[1][1], rule[1][2]
        field_class = forms.IntegerField if rule[1][0] == "int" else forms.FloatField
        return field_class(
            required=False,
            min_value=low,
            max_value=high,
            label=label,
            help_text=f"{low:,}–{high:,}; empty: none",
            widget=forms.NumberInput(
                attrs={"placeholder": "none", "step": "1" if rule[1][0] == "int" else "any"}
            ),
        )
    if kind == "bool":
        return forms.BooleanField(required=False, initial=default, label=label)
    if kind == "int":
        low, high = rule[1], rule[2]
        return forms.IntegerField(
            required=False,
            min_value=low,
            max_value=high,
            initial=default,
            label=label,
            help_text=f"{low:,}–{high:,}; default {default:,}",
            widget=forms.NumberInput(attrs={"placeholder": str(default)}),
        )
    if kind == "number":
        low, high = rule[1], rule[2]
        return forms.FloatField(
            required=False,
            min_value=low,
            max_value=high,
            initial=default,
            label=label,
            help_text=f"{low}–{high}; default {default}",
            widget=forms.NumberInput(attrs={"placeholder": str(default), "step": "any"}),
        )
    if kind == "choice":
        return forms.ChoiceField(
            choices=[(c, c) for c in sorted(rule[1])], required=False, initial=default, label=label
        )
    raise ValueError(f"no form field for the settings rule {rule!r}")


def _setting_leaves(
    rules: dict, defaults: dict, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple, tuple, Any]]:
    for key, rule in rules.items():
        if isinstance(rule, dict):
            yield from _setting_leaves(rule, defaults[key], (*path, key))
        elif rule[0] == "policy_map":
            continue  # a map of tool names (`approvals`): set in the JSON field
        else:
            yield (*path, key), rule, defaults[key]


def _deep_merge(base: dict, over: dict) -> dict:
    merged = dict(base)
    for key, value in over.items():
        merged[key] = (
            _deep_merge(merged[key], value)
            if isinstance(value, dict) and isinstance(merged.get(key), dict)
            else value
        )
    return merged


def settings_json(raw: str | None) -> dict | None:
    """A settings field's JSON object (None when left empty), or a form error saying what is
    wrong with it."""
    raw = (raw or "").strip()
    if not raw:
        return None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise forms.ValidationError(f"Not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno}).") from exc
    if not isinstance(value, dict):
        raise forms.ValidationError("Settings are a JSON object.")
    return value


@dataclass(frozen=True)
class SettingsGroup:
    """The fields of one top-level setting (a feature's, usually): its switch and its knobs."""

    name: str
    switch: forms.BoundField | None
    knobs: list[forms.BoundField]


class SessionCreateForm(forms.Form):
    """A new session: its fields, a field per setting (generated from the features' settings
    and rules, so a new feature's settings appear here by themselves), and advanced JSON.

    The generated fields apply only when the form carried them (`with_settings_fields`): a
    client posting just a title or JSON gets the defaults, not every switch off. The JSON is
    applied over the fields; the whole is validated as a client's settings are."""

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
    with_settings_fields = forms.BooleanField(required=False, initial=True, widget=forms.HiddenInput)
    settings = forms.CharField(
        required=False,
        label="Advanced: settings as JSON",
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": '{"notepad": {"position": "message"}}'}),
        help_text="Optional; applied over the fields above (PROTOCOL.md names every setting).",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        feature_set = features()
        self.setting_paths: dict[str, tuple] = {}
        for path, rule, default in _setting_leaves(feature_set.settings_rules, feature_set.default_settings):
            name = SETTING_PREFIX + "__".join(path)
            self.fields[name] = _setting_field(rule, default, path[-1].replace("_", " "))
            self.setting_paths[name] = path

    def settings_groups(self) -> list[SettingsGroup]:
        """The generated fields by top-level setting, switch first (for the template)."""
        groups: dict[str, SettingsGroup] = {}
        for name, path in self.setting_paths.items():
            group = groups.setdefault(path[0], SettingsGroup(path[0].replace("_", " "), None, []))
            if len(path) == 2 and path[1] == "enabled":
                groups[path[0]] = SettingsGroup(group.name, self[name], group.knobs)
            else:
                group.knobs.append(self[name])
        return list(groups.values())

    def clean_system_prompt(self) -> str:
        return newlines_lf(self.cleaned_data.get("system_prompt") or "")

    def clean_settings(self) -> dict | None:
        value = settings_json(self.cleaned_data.get("settings"))
        if value is None:
            return None
        try:
            settings_clean(value, schema=features().settings_schema)
        except SpecError as exc:
            raise forms.ValidationError(exc.message) from exc
        return value

    def _fields_settings(self) -> dict:
        """The generated fields' values as a settings object (an empty number: its default)."""
        values: dict = {}
        for name, path in self.setting_paths.items():
            value = self.cleaned_data.get(name)
            if value is None or value == "":
                continue
            node = values
            for key in path[:-1]:
                node = node.setdefault(key, {})
            node[path[-1]] = value
        return values

    def clean(self) -> dict[str, Any] | None:
        cleaned = super().clean()
        if cleaned is None or self.errors:
            return cleaned
        given = self._fields_settings() if cleaned.get("with_settings_fields") else {}
        if cleaned.get("settings"):
            given = _deep_merge(given, cleaned["settings"])
        try:
            cleaned["settings"] = settings_clean(given, schema=features().settings_schema) if given else None
        except SpecError as exc:
            self.add_error("settings", exc.message)
        return cleaned

    def session_fields(self) -> dict[str, Any]:
        """The cleaned values as `engine.sessions.session_create` takes them (None: its default)."""
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
        widget=forms.Textarea(
            attrs={"rows": 2, "placeholder": "Message the agent (/ comes here, Ctrl+Enter sends)"}
        ),
    )

    def clean_content(self) -> str:
        content = newlines_lf(self.cleaned_data["content"])
        if not content.strip():
            raise forms.ValidationError("Write something first.")
        return content


class SessionUpdateForm(forms.Form):
    """An operator's change of a session (`engine.sessions.session_update`, as PROTOCOL.md
    v1.2's `session.update`): the form only parses; the operation checks every value as
    `session.create`'s are, all or nothing. An empty window, threshold or settings field
    leaves that field as it is; the settings JSON is merged into the session's settings."""

    title = forms.CharField(required=False, max_length=MAX_TITLE_CHARS)
    context_window = forms.IntegerField(required=False, label="Context window (tokens)")
    compact_threshold = forms.FloatField(required=False, label="Compact threshold (0–1)")
    settings = forms.CharField(
        required=False,
        label="Settings as JSON",
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": '{"notepad": {"position": "message"}}'}),
        help_text="Optional; the keys given change the session's settings, the others stay.",
    )

    # The session's budget (`settings.budget`): applied only when the form carried these fields
    # (`with_budget_fields`), an empty one meaning no limit; the settings JSON may name it too.
    with_budget_fields = forms.BooleanField(required=False, widget=forms.HiddenInput)
    budget_max_cost_usd = forms.FloatField(
        required=False,
        min_value=0,
        max_value=MAX_BUDGET_USD,
        label="Budget: cost (USD)",
        widget=forms.NumberInput(attrs={"placeholder": "no limit", "step": "any"}),
    )
    budget_max_input_tokens = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=MAX_BUDGET_TOKENS,
        label="Budget: input tokens",
        widget=forms.NumberInput(attrs={"placeholder": "no limit"}),
    )
    budget_max_output_tokens = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=MAX_BUDGET_TOKENS,
        label="Budget: output tokens",
        widget=forms.NumberInput(attrs={"placeholder": "no limit"}),
        help_text="The session's whole tree counts (its sub-sessions' calls too); empty: no limit.",
    )
    BUDGET_FIELDS = {
        "max_cost_usd": "budget_max_cost_usd",
        "max_input_tokens": "budget_max_input_tokens",
        "max_output_tokens": "budget_max_output_tokens",
    }

    # Which field a `SpecError` from the operation is about (its message names the field).
    ERROR_FIELDS = ("context_window", "compact_threshold", "title")

    @classmethod
    def initial_of(cls, session: Any) -> dict[str, Any]:
        """The form's values for `session`: its title, window, threshold and budget."""
        limits = budget_limits(session.settings)
        return {
            "title": session.title,
            "context_window": session.context_window,
            "compact_threshold": session.compact_threshold,
            "with_budget_fields": True,
            **{field: getattr(limits, limit) for limit, field in cls.BUDGET_FIELDS.items()},
        }

    def clean_settings(self) -> dict | None:
        return settings_json(self.cleaned_data.get("settings"))

    def clean(self) -> dict[str, Any] | None:
        cleaned = super().clean()
        if cleaned is None or self.errors or not cleaned.get("with_budget_fields"):
            return cleaned
        given = {limit: cleaned.get(field) for limit, field in self.BUDGET_FIELDS.items()}
        cleaned["settings"] = _deep_merge({BUDGET_SETTING: given}, cleaned.get("settings") or {})
        return cleaned

    def add_spec_error(self, error: SpecError) -> None:
        """Show the operation's refusal on the field it names (else above the form)."""
        if error.code == "invalid_settings":
            budget_field = next(
                (
                    field
                    for limit, field in self.BUDGET_FIELDS.items()
                    if error.message.startswith(f"settings.{BUDGET_SETTING}.{limit} ")
                ),
                None,
            )
            self.add_error(budget_field or "settings", error.message)
            return
        field = next((f for f in self.ERROR_FIELDS if error.message.startswith(f)), None)
        self.add_error(field, error.message)
