"""The observation reader's parameters on the dashboard: it parses; the observation selectors
decide what a read returns."""

from __future__ import annotations

from typing import Any

from django import forms

OBSERVATION_MODES = ("head", "tail", "range", "lines", "grep")


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
