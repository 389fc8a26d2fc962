"""The `knowledge` settings: exactly PROTOCOL.md v1.2's keys and defaults, and their rules."""

from __future__ import annotations

from typing import Any

import pytest

from sessions_app.engine.features import features
from sessions_app.validation import SpecError, settings_clean

PROTOCOL_DEFAULTS = {
    "learned_editable": True,
    "learned_max_chars": 8000,
    "skills_writable": True,
    "max_skills": 64,
    "tool_authoring": True,
    "refresh": "compaction",
}


def test_the_defaults_are_protocols() -> None:
    assert features().default_settings["knowledge"] == PROTOCOL_DEFAULTS


def test_a_partial_knowledge_setting_keeps_the_other_defaults() -> None:
    clean = settings_clean({"knowledge": {"refresh": "immediate"}}, schema=features().settings_schema)
    assert clean["knowledge"] == {**PROTOCOL_DEFAULTS, "refresh": "immediate"}


@pytest.mark.parametrize(
    "knowledge",
    [
        {"refresh": "later"},
        {"learned_max_chars": 0},
        {"learned_max_chars": 100_001},
        {"max_skills": -1},
        {"max_skills": 1_001},
        {"learned_editable": "yes"},
        {"skills_writable": 1},
        {"tool_authoring": None},
        {"unknown": True},
    ],
)
def test_a_bad_knowledge_setting_is_refused(knowledge: dict[str, Any]) -> None:
    with pytest.raises(SpecError):
        settings_clean({"knowledge": knowledge}, schema=features().settings_schema)


def test_the_knowledge_tools_come_first_of_the_features() -> None:
    names = [feature.name for feature in features().features]
    assert names[:2] == ["core", "knowledge"]
