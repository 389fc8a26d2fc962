"""The memory history views' parameters: which change to show and compare (GET), and a restore
(POST). They parse; the selectors and services decide what exists and what may be written."""

from __future__ import annotations

from typing import Any

from django import forms

AGAINST_CHOICES = [("previous", "the change before"), ("current", "the current text")]


class HistoryQueryForm(forms.Form):
    version = forms.IntegerField(
        required=False, min_value=0, error_messages={"invalid": "version must be a whole number, 0 or more."}
    )
    # A moment (ISO 8601, e.g. an archive's time): the change that was current then.
    at = forms.DateTimeField(
        required=False,
        error_messages={"invalid": "at must be a date and time in ISO 8601, e.g. 2026-11-23T09:40:00+00:00."},
    )
    against = forms.ChoiceField(
        required=False,
        choices=AGAINST_CHOICES,
        error_messages={"invalid_choice": "against must be previous or current."},
    )
    before = forms.IntegerField(
        required=False, min_value=1, error_messages={"invalid": "before must be a whole number, 1 or more."}
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("version") is not None and data.get("at") is not None:
            raise forms.ValidationError("Give version or at, not both.")
        return data

    def query(self) -> dict[str, Any]:
        """The selector's keyword arguments."""
        data = self.cleaned_data
        return {
            "version": data.get("version"),
            "at": data.get("at"),
            "against": data.get("against") or "previous",
            "before": data.get("before"),
        }

    def error_lines(self) -> list[str]:
        lines = []
        for name, errors in self.errors.items():
            text = " ".join(str(error) for error in errors)
            lines.append(text if name == "__all__" else f"{name}: {text}")
        return lines


class RestoreForm(forms.Form):
    """Restore a change: `base_version` is the version the operator saw as current. After a
    conflict the editor also posts `content`, the operator's (merged) text, which is saved instead."""

    base_version = forms.IntegerField(min_value=0, widget=forms.HiddenInput)
    content = forms.CharField(required=False, strip=False, widget=forms.Textarea(attrs={"rows": 14}))

    def edited_text(self) -> str | None:
        """The operator's text when the form carried one (after a conflict), else None."""
        if "content" not in self.data:
            return None
        return (self.cleaned_data.get("content") or "").replace("\r\n", "\n")
