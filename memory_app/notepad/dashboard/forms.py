"""The notepad's editor on the dashboard: it parses; the notepad's services decide what is valid."""

from __future__ import annotations

from django import forms

from sessions_app.dashboard.forms import newlines_lf


class NotepadForm(forms.Form):
    content = forms.CharField(required=False, strip=False, widget=forms.Textarea(attrs={"rows": 14}))
    # The version the operator's editor started from: a notepad that moved on is a conflict.
    base_version = forms.IntegerField(min_value=0, widget=forms.HiddenInput)

    def clean_content(self) -> str:
        return newlines_lf(self.cleaned_data.get("content") or "")
