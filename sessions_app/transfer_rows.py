"""Rows as a session's export document holds them (docs/export.md), and back.

One codec for every table the document carries, core's and the features' alike: a row is a JSON
object of the named fields (by attname: a foreign key is `turn_id`), a date an ISO 8601 text, a
UUID its text, binary data base64. Reading one back checks every field against the model's own
field (present, of its type, null only where the column takes null), so that a malformed
document is refused naming the field (`DocumentError`), before anything is written.
"""

from __future__ import annotations

import base64
import datetime
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from django.db import models
from django.db.backends.base.operations import BaseDatabaseOperations


class DocumentError(ValueError):
    """What is wrong with an import document, and where (`messages[3].content: ...`)."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}" if where else problem)
        self.where = where
        self.problem = problem


def value_export(value: Any) -> Any:
    """A field's value as JSON."""
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    return value


def row_export(row: Any, fields: Iterable[str]) -> dict[str, Any]:
    """The named fields (attnames) of a model instance as a JSON object."""
    return {name: value_export(getattr(row, name)) for name in fields}


def values_export(values: Mapping[str, Any], fields: Iterable[str]) -> dict[str, Any]:
    """As `row_export`, for a row read with `.values()`."""
    return {name: value_export(values[name]) for name in fields}


def _field(model: type[models.Model], attname: str) -> models.Field:
    for field in model._meta.concrete_fields:
        if field.attname == attname:
            return field
    raise LookupError(f"{model.__name__} has no field {attname}")


_INTEGER = (models.IntegerField, models.BigIntegerField, models.PositiveIntegerField, models.AutoField)
_TEXT = (models.CharField, models.TextField)


def _target(field: models.Field) -> models.Field:
    """The field a foreign key's value is of (its target's primary key)."""
    while isinstance(field, models.ForeignKey):
        field = field.target_field
    return field


def value_import(field: models.Field, value: Any, where: str) -> Any:
    """`value` checked against `field` and converted to what the model takes."""
    if value is None:
        if field.null:
            return None
        raise DocumentError(where, "must not be null")
    target = _target(field)
    if isinstance(target, models.BooleanField):
        if not isinstance(value, bool):
            raise DocumentError(where, "must be true or false")
        return value
    if isinstance(target, _INTEGER):
        if isinstance(value, bool) or not isinstance(value, int):
            raise DocumentError(where, "must be an integer")
        # The portable ranges (PostgreSQL's), whatever this database takes: a document one
        # server took imports into any.
        low, high = BaseDatabaseOperations.integer_field_ranges.get(target.get_internal_type(), (None, None))
        if (low is not None and value < low) or (high is not None and value > high):
            raise DocumentError(where, f"must be from {low} to {high}")
        return value
    if isinstance(target, models.FloatField):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise DocumentError(where, "must be a number")
        return float(value)
    if isinstance(target, models.UUIDField):
        try:
            return uuid.UUID(value) if isinstance(value, str) else _fail()
        except ValueError:
            raise DocumentError(where, "must be a UUID") from None
    if isinstance(target, models.DateTimeField):
        try:
            parsed = datetime.datetime.fromisoformat(value) if isinstance(value, str) else _fail()
        except ValueError:
            raise DocumentError(where, "must be an ISO 8601 date and time") from None
        if parsed.tzinfo is None:
            raise DocumentError(where, "must be an ISO 8601 date and time with its UTC offset")
        return parsed
    if isinstance(target, models.BinaryField):
        try:
            return base64.b64decode(value, validate=True) if isinstance(value, str) else _fail()
        except ValueError:
            raise DocumentError(where, "must be base64 text") from None
    if isinstance(target, _TEXT):
        if not isinstance(value, str):
            raise DocumentError(where, "must be a string")
        if "\x00" in value:
            raise DocumentError(where, "must not hold NUL characters")
        max_length = getattr(target, "max_length", None)
        if isinstance(target, models.CharField) and max_length is not None and len(value) > max_length:
            raise DocumentError(where, f"must be at most {max_length} characters")
        if field.choices and value not in {choice for choice, _ in field.choices}:
            allowed = ", ".join(sorted(str(choice) for choice, _ in field.choices))
            raise DocumentError(where, f"must be one of {allowed}")
        return value
    if isinstance(target, models.JSONField):
        return value
    raise DocumentError(where, f"a field of type {type(target).__name__} cannot be imported")


def _fail() -> Any:
    raise ValueError


def row_import(
    model: type[models.Model],
    data: Any,
    *,
    fields: Sequence[str],
    where: str,
    fixed: Mapping[str, Any] | None = None,
) -> Any:
    """An unsaved `model` instance from the JSON object `data`: each of `fields` (attnames) read
    from it and checked, then `fixed` (values the importer decides) set over them."""
    if not isinstance(data, dict):
        raise DocumentError(where, "must be an object")
    values: dict[str, Any] = {}
    for name in fields:
        if name not in data:
            raise DocumentError(f"{where}.{name}", "is missing")
        values[name] = value_import(_field(model, name), data[name], f"{where}.{name}")
    values.update(fixed or {})
    return model(**values)


def list_at(data: Any, key: str, where: str) -> list[Any]:
    """`data[key]`, which must be a list."""
    if not isinstance(data, dict):
        raise DocumentError(where, "must be an object")
    if key not in data:
        raise DocumentError(f"{where}.{key}" if where else key, "is missing")
    value = data[key]
    if not isinstance(value, list):
        raise DocumentError(f"{where}.{key}" if where else key, "must be a list")
    return value
