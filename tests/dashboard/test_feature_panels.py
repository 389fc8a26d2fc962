"""What the features show on the session page comes from each feature's `FeatureDashboard`, in
feature order: the dashboard names none of them."""

from __future__ import annotations

import re

import pytest

from sessions_app.engine.contract import DashboardPanel, Feature, FeatureDashboard
from sessions_app.engine.features import FeatureSet
from tests.dashboard.conftest import session_new

pytestmark = pytest.mark.django_db

NOTEPAD = "memory_app.notepad.feature.FEATURE"
SCRATCHPAD = "memory_app.scratchpad.feature.FEATURE"
OBSERVATIONS = "memory_app.observations.feature.FEATURE"


def tabs_of(html: str) -> list[tuple[str, str]]:
    """(name, key) of each of the page's tab buttons, in order."""
    tabs = []
    for button in re.findall(r"<button [^>]*data-tab-button=[^>]*>", html):
        name = re.search(r'data-tab-button="([^"]+)"', button)
        key = re.search(r'aria-keyshortcuts="([^"]+)"', button)
        assert name is not None
        tabs.append((name.group(1), key.group(1) if key else ""))
    return tabs


def test_the_features_panels_are_tabs_between_context_and_archives_with_their_keys(operator_client):
    html = operator_client.get(f"/sessions/{session_new().pk}/").content.decode()
    assert tabs_of(html) == [
        ("transcript", "0"),
        ("context", "1"),
        ("notepad", "2"),
        ("scratchpad", "3"),
        ("observations", "4"),
        ("archives", "5"),
        ("inspector", "6"),
        ("timeline", "7"),
    ]
    for name in ("notepad", "scratchpad", "observations"):
        assert f'<section class="panel" data-panel="{name}">' in html
    assert "<kbd>1</kbd>–<kbd>7</kbd></td><td>Context, Notepad, Scratchpad, Observations, Archives" in html


def test_the_tabs_follow_the_features_order_and_only_the_features_there_are(operator_client, settings):
    features = [path for path in settings.PALIMPSEST_FEATURES if path not in (NOTEPAD, OBSERVATIONS)]
    features.insert(features.index(SCRATCHPAD) + 1, NOTEPAD)
    settings.PALIMPSEST_FEATURES = features
    html = operator_client.get(f"/sessions/{session_new().pk}/").content.decode()
    assert [name for name, _ in tabs_of(html)] == [
        "transcript",
        "context",
        "scratchpad",
        "notepad",
        "archives",
        "inspector",
        "timeline",
    ]
    assert 'data-panel="observations"' not in html and ("archives", "4") in tabs_of(html)
    assert "<kbd>1</kbd>–<kbd>6</kbd></td><td>Context, Scratchpad, Notepad, Archives" in html


def test_the_address_may_name_a_features_tab_but_no_unknown_one(operator_client):
    session = session_new()
    html = operator_client.get(f"/sessions/{session.pk}/?tab=scratchpad").content.decode()
    assert '<section class="panel shown" data-panel="scratchpad">' in html
    html = operator_client.get(f"/sessions/{session.pk}/?tab=nothing").content.decode()
    assert '<section class="panel shown" data-panel="context">' in html and 'data-tab="context"' in html


def test_two_features_may_not_offer_a_panel_of_one_name():
    def panel() -> DashboardPanel:
        return DashboardPanel(name="memo", template="memo.html", context=lambda session: {})

    with pytest.raises(ValueError, match="two features offer a dashboard panel named 'memo'"):
        FeatureSet(
            [
                Feature(name="a", dashboard=FeatureDashboard(panels=[panel()])),
                Feature(name="b", dashboard=FeatureDashboard(panels=[panel()])),
            ]
        )


def test_two_features_may_not_keep_a_history_of_one_name():
    def url(session_id: object) -> str:
        return "/"

    with pytest.raises(ValueError, match="two features keep a history named 'memo'"):
        FeatureSet(
            [
                Feature(name="a", dashboard=FeatureDashboard(histories={"memo": url})),
                Feature(name="b", dashboard=FeatureDashboard(histories={"memo": url})),
            ]
        )
