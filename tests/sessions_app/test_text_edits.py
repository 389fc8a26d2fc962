"""Seed 000's targeted text edits, written once for the notepad and the learned text: each
operation, and the subject's name in the errors."""

from __future__ import annotations

import pytest

from sessions_app.common.text_edits import TextEdit, TextEditError, TextSubject, text_edit_apply

SUBJECT = TextSubject(name="the text", where_current="look again.")


def apply(text: str, **fields: object) -> str:
    return text_edit_apply(text=text, edit=TextEdit(**fields), subject=SUBJECT)  # type: ignore[arg-type]


def test_append_and_prepend_add_exactly_the_content() -> None:
    assert apply("b", operation="append", content="c") == "bc"
    assert apply("b", operation="prepend", content="a") == "ab"


def test_find_replace_replaces_the_first_occurrence_or_all() -> None:
    assert apply("x x", operation="find_replace", find="x", replace="y") == "y x"
    assert apply("x x", operation="find_replace", find="x", replace="y", replace_all=True) == "y y"


def test_delete_removes_every_occurrence() -> None:
    assert apply("a-a-b", operation="delete", content="a-") == "b"


def test_errors_name_the_subject_and_where_its_text_is() -> None:
    with pytest.raises(TextEditError, match=r'"find" text does not occur in the text, .*; look again\.$'):
        apply("abc", operation="find_replace", find="z", replace="")
    with pytest.raises(
        TextEditError, match=r'"content" to delete does not occur in the text, .*; look again\.$'
    ):
        apply("abc", operation="delete", content="z")
