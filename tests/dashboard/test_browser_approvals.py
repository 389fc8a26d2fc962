"""Tool approvals on the dashboard in a real browser (chromium, Playwright, a real daphne), at 800
and 1440 px: a call whose policy is `always_ask` appears, live, on its session's page and on the
Approvals page (reached from the nav) with its input shown as text (a script in it does not run);
one click approves it (the call runs), another denies it with a reason (the model reads it), and
nothing makes a page wider than the window."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.dashboard import test_browser as _browser
from tests.dashboard.test_browser import CHROMIUM, Server, logged_in

# test_browser.py's fixtures, used here as they are (a daphne of this module's own).
_turns_finish = _browser._turns_finish
browser = _browser.browser
new_page = _browser.new_page
screenshots = _browser.screenshots

pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed")

WIDTHS = [800, 1440]
PWNED = "window.pwned"
HOSTILE = '<script>window.pwned=1</script><img src=x onerror="window.pwned=2"> ' + "long" * 80


@pytest.fixture(scope="module")
def approvals_server(tmp_path_factory: Any) -> Iterator[Server]:
    yield from _browser._serve(tmp_path_factory.mktemp("approvals"))


def fits(page: Any, width: int) -> None:
    assert page.evaluate("document.documentElement.scrollWidth") <= width, page.url
    assert page.evaluate(PWNED) is None, page.url


def ask(page: Any, words: str) -> None:
    """Send a message whose `count_words` call waits for an approval; wait until the session's
    page shows it (live, over the dashboard's websocket)."""
    before = page.locator("#session-approvals .approval").count()
    page.fill("#id_content", "tool count_words " + json.dumps({"text": words}))
    page.click("#message-form button:has-text('Send')")
    page.wait_for_function(
        f"document.querySelectorAll('#session-approvals .approval').length > {before}"
        " || document.querySelector('#message-form .error-text')"
    )
    assert page.locator("#message-form .error-text").count() == 0, page.locator("#message-form").inner_text()


@pytest.mark.parametrize("width", WIDTHS)
def test_approvals_at_800_and_1440_px(new_page, approvals_server, screenshots, width):
    page = logged_in(new_page, approvals_server)
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(approvals_server.url + "/")
    page.click("summary:has-text('New session')")
    page.fill("#id_title", f"Approvals at {width} px")
    page.click("summary:has-text('Advanced: settings as JSON')")
    page.fill("#id_settings", json.dumps({"approvals": {"count_words": "always_ask"}}))
    page.click("button:has-text('Create session')")
    page.wait_for_url(re.compile(r".*/sessions/[0-9a-f-]{36}/(\?.*)?$"))
    page.wait_for_selector("#live-dot.live")
    session_url = page.url.split("?")[0]
    session_path = session_url.removeprefix(approvals_server.url)

    # The call waits, shown on the session's page with its input as text.
    ask(page, HOSTILE)
    card = page.locator("#session-approvals .approval").first
    assert card.locator(".approval-name").inner_text() == "count_words"
    assert "<script>window.pwned=1</script>" in card.locator(".approval-input").inner_text()
    assert page.locator("#session-approvals script, #session-approvals img").count() == 0
    fits(page, width)
    page.screenshot(path=screenshots / f"approval-session-{width}.png", full_page=True)

    # The Approvals page, from the nav: the call with a link to its session; Approve runs it.
    page.click(".topnav a:has-text('Approvals')")
    listed = page.locator(f"#approval-list .approval:has(a[href='{session_path}'])")
    assert listed.count() == 1
    assert "<script>" in listed.locator(".approval-input").inner_text()
    fits(page, width)
    page.screenshot(path=screenshots / f"approvals-{width}.png", full_page=True)
    listed.locator("button:has-text('Approve')").click()
    page.wait_for_function(
        "!document.querySelector('#approval-list .approval .approval-input')"
        " || ![...document.querySelectorAll('#approval-list .approval-input')]"
        ".some((e) => e.textContent.includes('window.pwned=1'))"
    )
    assert page.locator("#approval-list .error-text").count() == 0

    # Back on the session's page: the call ran (its result, not an error), and nothing waits.
    page.goto(session_url)
    page.wait_for_selector("details.tool-result:has-text('count_words')")
    # The model's step after the result may still run: a message sent now would be refused.
    page.wait_for_selector("#session-status.status-idle")
    page.wait_for_selector("#live-dot.live")
    assert page.locator("details.tool-result.is-error").count() == 0
    assert page.locator("#session-approvals .approval").count() == 0

    # A second call denied from the session's page, with a reason the model reads.
    ask(page, "one two")
    page.fill("#session-approvals .approval-reason", "not during the audit")
    page.click("#session-approvals button:has-text('Deny')")
    page.wait_for_selector("details.tool-result.is-error:has-text('count_words')")
    page.wait_for_function("document.querySelectorAll('#session-approvals .approval').length === 0")
    page.locator("details.tool-result.is-error summary").last.click()
    assert "not during the audit" in page.locator("details.tool-result.is-error").last.inner_text()
    fits(page, width)

    # An answer for a call that no longer waits changes nothing and says why.
    page.goto(approvals_server.url + "/approvals/")
    assert page.locator("#approval-list .empty-approvals").count() == 1
    fits(page, width)
