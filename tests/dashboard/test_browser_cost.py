"""Cost a user can see, in a real browser (issue 32, item 3): the usage panel's table of turns
and the prompt inspector's prefix break, at 800 and 1440 px, against a real daphne (the fixtures
and helpers of test_browser.py, whose tests are not collected again here)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.dashboard import test_browser as _browser
from tests.dashboard.test_browser import CHROMIUM, logged_in, said, session_created, tab

# test_browser.py's fixtures, used here as they are (a daphne of this module's own).
_turns_finish = _browser._turns_finish
anthropic_server = _browser.anthropic_server
browser = _browser.browser
new_page = _browser.new_page
screenshots = _browser.screenshots
scripted_server = _browser.scripted_server

pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed")


def within(page: Any, selector: str, width: int) -> None:
    element = page.locator(selector).first
    element.scroll_into_view_if_needed()
    box = element.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, selector


@pytest.mark.parametrize("width", [800, 1440])
def test_turn_costs_and_the_prefix_break_read_well_at_800_and_1440_px(
    new_page, scripted_server, screenshots, width
):
    page = logged_in(new_page, scripted_server)
    page.set_viewport_size({"width": width, "height": 900})
    # Position `system`: the notepad's edit rewrites the system prompt, and the inspector marks it
    # (the default, `epoch`, leaves the system prompt as it was: test_prefix_break.py).
    page.goto(scripted_server.url + "/")
    page.click("summary:has-text('New session')")
    page.fill("#id_title", f"Cost at {width} px")
    page.click("summary:has-text('Settings of each feature')")
    page.select_option("#id_setting__notepad__position", "system")
    page.click("button:has-text('Create session')")
    page.wait_for_url(re.compile(r".*/sessions/[0-9a-f-]{36}/(\?.*)?$"))
    page.wait_for_selector("#live-dot.live")
    said(page, "hello")
    said(page, 'remember: the <img src=x onerror="window.pwned=1"> deadline is Friday')
    # The latest request follows the notepad's edit: its prefix broke at the notepad's section.
    tab(page, "inspector")
    page.wait_for_selector("#inspector #prefix-summary[data-reason=memory]")
    summary = re.sub(r"\s+", " ", page.locator("#prefix-summary").inner_text())
    assert "broke at system[1] — memory (per-call section changed: ## Session Notepad)" in summary
    mark = page.locator("#inspector .prefix-break-mark[data-break=memory]")
    assert mark.count() == 1 and "## Session Notepad" in mark.locator("xpath=..").inner_text()
    within(page, "#prefix-summary", width)
    within(page, "#inspector .prefix-break-mark", width)
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.screenshot(path=screenshots / f"prompt-inspector-break-{width}.png")
    # The table of turns: one row a turn, newest first, and the next turn arrives live.
    tab(page, "context")
    page.locator("#turn-usage").scroll_into_view_if_needed()  # it loads when scrolled to
    page.wait_for_selector("#turn-usage .turn-usage-row[data-turn='2']")
    assert page.locator("#turn-usage .turn-usage-row").count() == 2
    if width < 900:  # the panels are tabs over the transcript: the table is hidden meanwhile
        tab(page, "transcript")
        said(page, "again")
        tab(page, "context")
    else:
        said(page, "again")
    page.wait_for_selector("#turn-usage .turn-usage-row[data-turn='3']")
    first = page.locator("#turn-usage .turn-usage-row").first
    assert first.get_attribute("data-turn") == "3"
    assert first.locator("[data-usage=cost]").inner_text() == "–"  # the scripted model is free
    for column in ("calls", "cache_read", "cache_hit", "cost"):
        within(page, f"#turn-usage .turn-usage-row [data-usage={column}]", width)
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    assert page.evaluate("window.pwned") is None
    page.locator("#turn-usage").screenshot(path=screenshots / f"usage-per-turn-{width}.png")


def test_a_cached_turn_is_billed_at_the_cache_prices_and_the_inspector_shows_its_reads(
    new_page, anthropic_server, screenshots
):
    page = logged_in(new_page, anthropic_server)
    session_created(page, anthropic_server, "Billed per turn")
    said(page, "What is in table 4?")
    said(page, "And in table 5?")
    tab(page, "context")
    page.locator("#turn-usage").scroll_into_view_if_needed()  # it loads when scrolled to
    page.wait_for_selector("#turn-usage .turn-usage-row[data-turn='2']")
    newest = page.locator("#turn-usage .turn-usage-row[data-turn='2']")
    assert newest.locator("[data-usage=cost]").inner_text().startswith("$")
    read = int(newest.locator("[data-usage=cache_read]").inner_text().replace(",", ""))
    assert read > 0 and newest.locator("[data-usage=cache_hit]").inner_text() not in ("–", "0.0%")
    page.locator("#turn-usage").screenshot(path=screenshots / "usage-per-turn.png")
    tab(page, "inspector")
    page.wait_for_selector("#inspector #prefix-summary")
    summary = page.locator("#prefix-summary").inner_text()
    assert f"Billed: {read:,} read" in summary
