"""The session list's GET parameters: filters, sort and page, validated.

`q` (search), `status`, `model`, `owner` (a client's token name, or `operator` for sessions no
client owns), `children` (`yes`/`no`: has sub-sessions), `sort` (a column, `-` first for
descending) and `page`. A bad value is an error naming the parameter and what it accepts; the
list is not shown with a filter silently dropped.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlencode

from django import forms

from sessions_app.models import SessionStatus
from sessions_app.validation import MAX_MODEL_CHARS

QUERY_MAX_CHARS = 200
OWNER_MAX_CHARS = 100
# The `owner` value of sessions an operator created (no agent client owns them).
OWNER_OPERATOR = "operator"
CHILDREN_CHOICES = {"yes": True, "no": False}
# Sortable columns: the name in the URL and its label. `sessions.session_list` says how each sorts.
SORT_COLUMNS = {
    "title": "Session",
    "status": "Status",
    "model": "Model",
    "activity": "Last activity",
    "messages": "Messages",
    "compactions": "Compactions",
    "tokens": "Tokens",
    "cost": "Cost",
}
DEFAULT_SORT = "-activity"
# Columns whose first click sorts the largest first.
DESCENDING_FIRST = frozenset({"activity", "messages", "compactions", "tokens", "cost"})


@dataclass(frozen=True)
class ListFilters:
    query: str = ""
    status: str = ""
    model: str = ""
    owner: str = ""
    children: str = ""  # "", "yes" or "no"

    @property
    def has_children(self) -> bool | None:
        return CHILDREN_CHOICES.get(self.children)

    @property
    def any(self) -> bool:
        return any(asdict(self).values())

    def selector_kwargs(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "status": self.status,
            "model": self.model,
            "owner": self.owner,
            "has_children": self.has_children,
        }

    def params(self) -> dict[str, str]:
        """The filters as URL parameters (empty ones left out)."""
        named = {
            "q": self.query,
            "status": self.status,
            "model": self.model,
            "owner": self.owner,
            "children": self.children,
        }
        return {key: value for key, value in named.items() if value}


def _one_of(name: str, value: str, allowed: list[str]) -> str:
    if value and value not in allowed:
        raise forms.ValidationError(f"Unknown {name} {value!r}: use one of {', '.join(allowed)}.")
    return value


class SessionListForm(forms.Form):
    q = forms.CharField(required=False, max_length=QUERY_MAX_CHARS)
    status = forms.CharField(required=False)
    model = forms.CharField(required=False, max_length=MAX_MODEL_CHARS)
    owner = forms.CharField(required=False, max_length=OWNER_MAX_CHARS)
    children = forms.CharField(required=False)
    sort = forms.CharField(required=False)
    page = forms.IntegerField(
        required=False,
        min_value=1,
        error_messages={"invalid": "page must be a whole number, 1 or more."},
    )

    def clean_status(self) -> str:
        return _one_of("status", self.cleaned_data["status"], list(SessionStatus.values))

    def clean_children(self) -> str:
        return _one_of("children value", self.cleaned_data["children"], list(CHILDREN_CHOICES))

    def clean_sort(self) -> str:
        sort = self.cleaned_data["sort"] or DEFAULT_SORT
        allowed = [*SORT_COLUMNS, *(f"-{column}" for column in SORT_COLUMNS)]
        return _one_of("sort", sort, allowed)

    def filters(self) -> ListFilters:
        data = self.cleaned_data
        return ListFilters(
            query=data["q"].strip(),
            status=data["status"],
            model=data["model"],
            owner=data["owner"],
            children=data["children"],
        )

    def error_lines(self) -> list[str]:
        return [f"{name}: {' '.join(str(e) for e in errors)}" for name, errors in self.errors.items()]


def list_filters_of(params: Any) -> ListFilters:
    """The filters of a query dict, or none at all when they are not valid (the list's websocket
    follows the page's filters, which the page has validated)."""
    form = SessionListForm(params)
    return form.filters() if form.is_valid() else ListFilters()


@dataclass(frozen=True)
class SortHeader:
    column: str
    label: str
    query: str  # the list's URL parameters when this header is clicked
    direction: str  # "asc", "desc", or "" when the list is not sorted by it
    numeric: bool


def sort_headers(*, filters: ListFilters, sort: str) -> list[SortHeader]:
    """The list's column headers: clicking one sorts by it, clicking it again reverses."""
    active = sort.lstrip("-")
    headers = []
    for column, label in SORT_COLUMNS.items():
        if column == active:
            direction = "desc" if sort.startswith("-") else "asc"
            next_sort = column if direction == "desc" else f"-{column}"
        else:
            direction = ""
            next_sort = f"-{column}" if column in DESCENDING_FIRST else column
        headers.append(
            SortHeader(
                column=column,
                label=label,
                query=urlencode({**filters.params(), "sort": next_sort}),
                direction=direction,
                numeric=column in {"messages", "compactions", "tokens", "cost"},
            )
        )
    return headers
