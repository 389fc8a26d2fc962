"""Budgets in a real browser (issue 36 item 4): a session created with a budget from the new
session form, its turn stopped by it, the usage panel's spend against each limit, and the Edit
form raising it so that the next message goes on, at 800 and 1440 px, against a real daphne
talking to the fake Messages API (priced models). The fixtures and helpers are test_browser.py's."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.dashboard import test_browser as _browser
from tests.dashboard.test_browser import CHROMIUM, logged_in, said, tab

_turns_finish = _browser._turns_finish
anthropic_server = _browser.anthropic_server
browser = _browser.browser
new_page = _browser.new_page
screenshots = _browser.screenshots

pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed")


def within(page: Any, selector: str, width: int) -> None:
    element = page.locator(selector).first
    element.scroll_into_view_if_needed()
    box = element.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, selector


def to_transcript(page: Any, width: int) -> None:
    """Where the message box is: at 800 px the panels are tabs over the transcript."""
    if width < 900:
        tab(page, "transcript")


@pytest.mark.parametrize("width", [800, 1440])
def test_a_budget_stops_the_session_shows_its_spend_and_raising_it_goes_on(
    new_page: Any, anthropic_server: Any, screenshots: Path, width: int
) -> None:
    page = logged_in(new_page, anthropic_server)
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(anthropic_server.url + "/")
    page.click("summary:has-text('New session')")
    page.fill("#id_title", f"Budget at {width} px")
    page.click("summary:has-text('Settings of each feature')")
    # A bad value first: a form error, nothing created.
    page.fill("#id_setting__budget__max_output_tokens", "-5")
    page.click("button:has-text('Create session')")
    page.locator("[data-field=setting__budget__max_output_tokens] .field-error").wait_for()
    page.fill("#id_setting__budget__max_output_tokens", "1")
    page.fill("#id_setting__budget__max_cost_usd", "2.5")
    page.click("button:has-text('Create session')")
    page.wait_for_url(re.compile(r".*/sessions/[0-9a-f-]{36}/(\?.*)?$"))
    page.wait_for_selector("#live-dot.live")
    # Nothing spent: the first call is made; its answer spends the output budget.
    said(page, "What is in table 4?")
    said(page, "And in table 5?")
    page.wait_for_selector("#transcript .turn-end[data-stop=budget_reached]")
    assert page.locator("#transcript article.msg.assistant").count() == 1  # no answer to the second
    tab(page, "context")
    line = page.locator("#usage-panel [data-budget-limit=max_output_tokens]")
    line.wait_for()
    assert line.locator("[data-budget-reached]").is_visible()
    assert re.fullmatch(r"\d+ of 1", line.locator("[data-budget-spent]").inner_text())
    cost = page.locator("#usage-panel [data-budget-limit=max_cost_usd]")
    assert cost.locator("[data-budget-spent]").inner_text().endswith("of $2.50")
    assert cost.locator("[data-budget-reached]").count() == 0
    for selector in (
        "#usage-panel [data-budget]",
        "#usage-panel .budget-bar",
        "#usage-panel [data-budget-spent]",
    ):
        within(page, selector, width)
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.locator("#usage-panel").screenshot(path=screenshots / f"budget-reached-{width}.png")
    # The Edit form shows the budget; a bad value is a form error, then raising it goes on.
    page.click("#update-form summary")
    assert page.locator("#id_budget_max_output_tokens").input_value() == "1"
    page.fill("#id_budget_max_output_tokens", "-1")
    page.click("#update-form button:has-text('Save')")
    page.locator("#update-form [data-field=budget_max_output_tokens] .field-error").wait_for()
    page.fill("#id_budget_max_output_tokens", "100000")
    page.click("#update-form button:has-text('Save')")
    page.wait_for_selector("#update-form [role=status]:has-text('Saved')")
    page.wait_for_selector(
        "#usage-panel [data-budget-limit=max_output_tokens] [data-budget-spent]:has-text('of 100,000')"
    )
    assert page.locator("#usage-panel [data-budget-reached]").count() == 0
    within(page, "#update-form", width)
    page.locator("#update-form").screenshot(path=screenshots / f"budget-edit-{width}.png")
    to_transcript(page, width)
    said(page, "And in table 6?")
    tab(page, "context")
    page.wait_for_selector("#usage-panel [data-usage=calls]:has-text('2')")
    assert page.evaluate("document.documentElement.scrollWidth") <= width
