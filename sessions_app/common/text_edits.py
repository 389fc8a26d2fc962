"""Seed 000's targeted text edits (`update_notepad`, and `edit_system_prompt`, which "the same
operations" apply to the agent's learned text): the pure text operation, written once.

Who stores the result, under which lock, with which limit, is the caller's (the notepad's
services, the agent's knowledge services).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

FIND_REPLACE = "find_replace"
APPEND = "append"
PREPEND = "prepend"
DELETE = "delete"
TEXT_EDIT_OPERATIONS = (FIND_REPLACE, APPEND, PREPEND, DELETE)


class TextEditError(ValueError):
    """An edit that cannot apply (text not found, a field missing or empty, an unknown operation):
    the text is unchanged. The message is written for whoever made the edit, the model included."""


@dataclass(frozen=True)
class TextEdit:
    """A targeted edit (`update_notepad`'s operations); `text_edit_apply` says what each needs."""

    operation: str
    content: str | None = None
    find: str | None = None
    replace: str | None = None
    replace_all: bool = False


@dataclass(frozen=True)
class TextSubject:
    """What the edited text is called in error messages (`"the notepad"`), and where its editor
    finds its current text (`"the notepad's current text is in your context, or call
    read_notepad."`)."""

    name: str
    where_current: str


def _needs(value: str | None, *, field: str, operation: str, meaning: str) -> str:
    if value is None:
        raise TextEditError(f'operation "{operation}" needs "{field}": {meaning}.')
    if value == "":
        raise TextEditError(f'operation "{operation}": "{field}" must not be empty.')
    return value


def text_edit_apply(*, text: str, edit: TextEdit, subject: TextSubject) -> str:
    """The text after `edit`; raises `TextEditError` if the edit cannot apply.

    - find_replace: `find` (non-empty, must occur) becomes `replace` ("" removes it), at its first
      occurrence, or at every occurrence with `replace_all`;
    - append / prepend: `content` (non-empty) is added exactly as given, no separator (DESIGN.md);
    - delete: every occurrence of `content` (non-empty, must occur) is removed, so that afterwards
      the text is gone (find_replace with replace "" removes one occurrence).
    """
    operation = edit.operation
    if operation == FIND_REPLACE:
        find = _needs(edit.find, field="find", operation=operation, meaning="the exact text to find")
        if edit.replace is None:
            raise TextEditError(
                'operation "find_replace" needs "replace": the replacement text ("" removes the found text).'
            )
        if find not in text:
            raise TextEditError(
                f'The "find" text does not occur in {subject.name}, so nothing was changed. It must match '
                f"exactly (whitespace and case included); {subject.where_current}"
            )
        return text.replace(find, edit.replace) if edit.replace_all else text.replace(find, edit.replace, 1)
    if operation == APPEND:
        return text + _needs(edit.content, field="content", operation=operation, meaning="the text to add")
    if operation == PREPEND:
        return _needs(edit.content, field="content", operation=operation, meaning="the text to add") + text
    if operation == DELETE:
        doomed = _needs(
            edit.content, field="content", operation=operation, meaning="the exact text to remove"
        )
        if doomed not in text:
            raise TextEditError(
                f'The "content" to delete does not occur in {subject.name}, so nothing was changed. It '
                f"must match exactly (whitespace and case included); {subject.where_current}"
            )
        return text.replace(doomed, "")
    choices = ", ".join(TEXT_EDIT_OPERATIONS)
    raise TextEditError(f'Unknown operation "{operation}". Use one of: {choices}.')


# Seed 000's schema of `update_notepad` ("parameters" there; `input_schema` in the Anthropic API),
# verbatim: `edit_system_prompt` takes the same (DESIGN.md, "Agents"). Shared, never copied.
TEXT_EDIT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "operation": {
            "type": "string",
            "enum": ["find_replace", "append", "prepend", "delete"],
            "description": "The type of edit to perform",
        },
        "content": {
            "type": "string",
            "description": "For append/prepend: text to add. For delete: text to remove.",
        },
        "find": {"type": "string", "description": "For find_replace: exact substring to find"},
        "replace": {"type": "string", "description": "For find_replace: replacement text"},
        "replace_all": {
            "type": "boolean",
            "description": "For find_replace: replace all occurrences. Default: false.",
        },
    },
    "required": ["operation"],
}
