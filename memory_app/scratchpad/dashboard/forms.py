"""A scratchpad space's editor on the dashboard: it parses; the scratchpad's services decide what
is valid."""

from __future__ import annotations

from django import forms

from memory_app.scratchpad.models import ScratchpadSpace
from sessions_app.dashboard.forms import newlines_lf


def space_value(space: str, text: str) -> str | list[str]:
    """What the operator typed as the space holds it: text, or for refs one ref a line."""
    if space == ScratchpadSpace.REFS:
        return [line.strip() for line in text.split("\n") if line.strip()]
    return text


class ScratchpadSpaceForm(forms.Form):
    space = forms.ChoiceField(choices=ScratchpadSpace.choices, widget=forms.HiddenInput)
    value = forms.CharField(required=False, strip=False, widget=forms.Textarea(attrs={"rows": 6}))
    base_version = forms.IntegerField(min_value=0, widget=forms.HiddenInput)

    def space_value(self) -> str | list[str]:
        """The value as the space holds it: text, or for refs one ref a line."""
        return space_value(self.cleaned_data["space"], newlines_lf(self.cleaned_data.get("value") or ""))
