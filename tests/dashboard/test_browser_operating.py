"""Operating a session from the dashboard in a real browser (issue 36 item 3: chromium,
Playwright, a real daphne) at 800 and 1440 px: its settings edited (a bad value is a form error
and changes nothing), the session ended, and deleted only once the confirmation is accepted."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.dashboard import test_browser as _browser
from tests.dashboard.test_browser import CHROMIUM, Server, logged_in, said, session_created, tab

# test_browser.py's fixtures, used here as they are.
_turns_finish = _browser._turns_finish
browser = _browser.browser
new_page = _browser.new_page
screenshots = _browser.screenshots
scripted_server = _browser.scripted_server

pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed")


def _fits(page: Any, width: int) -> None:
    assert page.evaluate("document.documentElement.scrollWidth") <= width, page.url


def _edit_form(page: Any, width: int) -> None:
    """Open the edit form (at 800 px the panels are tabs over the transcript: its tab first)."""
    if width < 1000:
        tab(page, "context")
    page.click("#update-form summary")


@pytest.mark.parametrize("width", [800, 1440])
def test_edit_end_and_delete_a_session(new_page: Any, scripted_server: Server, screenshots: Path, width: int):
    page = logged_in(new_page, scripted_server)
    page.set_viewport_size({"width": width, "height": 900})
    url = session_created(page, scripted_server, f"operated at {width}")
    session_id = re.search(r"/sessions/([0-9a-f-]{36})/", url).group(1)  # type: ignore[union-attr]
    said(page, "echo before the edit")

    # A bad value: the form says which, and nothing is saved.
    _edit_form(page, width)
    page.fill("#update-form [name=compact_threshold]", "7")
    page.click("#update-form button:has-text('Save')")
    page.wait_for_selector("#update-form [data-field=compact_threshold] .field-error")
    _fits(page, width)
    page.reload()
    _edit_form(page, width)
    assert page.locator("#update-form [name=compact_threshold]").input_value() == "0.8"

    # A good one is saved and shown.
    page.fill("#update-form [name=title]", f"renamed at {width}")
    page.fill("#update-form [name=settings]", json.dumps({"max_steps_per_turn": 9}))
    page.click("#update-form button:has-text('Save')")
    page.wait_for_selector("#update-form [role=status]:has-text('Saved')")
    page.reload()
    assert f"renamed at {width}" in page.locator(".session-head").inner_text()
    _edit_form(page, width)
    page.click("#update-form .current-settings summary")
    assert '"max_steps_per_turn": 9' in page.locator("#update-form .current-settings pre").inner_text()
    _fits(page, width)
    page.screenshot(path=str(screenshots / f"session-edit-{width}.png"), full_page=False)

    # End: confirmed, the message box becomes the ended notice.
    if width < 1000:
        tab(page, "transcript")
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("[data-end-session]")
    page.wait_for_selector("#message-form:has-text('ended')")
    _fits(page, width)

    # Delete: dismissed changes nothing; accepted goes to the list, where it is gone.
    page.once("dialog", lambda dialog: dialog.dismiss())
    page.click("[data-delete-session]")
    page.wait_for_timeout(300)  # a request the dismissal failed to stop would be out by now
    assert page.url.startswith(url)
    assert page.goto(url).status == 200  # type: ignore[union-attr]
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("[data-delete-session]")
    page.wait_for_url(scripted_server.url + "/")
    assert session_id not in page.content()
    assert page.goto(url).status == 404  # type: ignore[union-attr]
