"""The session page's Export in a real browser (docs/export.md), at 800 and 1440 px, against a
real daphne (the fixtures and helpers of test_browser.py, whose tests are not collected again
here): the button sits in the page, and clicking it downloads the session's document."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.dashboard import test_browser as _browser
from tests.dashboard.test_browser import CHROMIUM, logged_in, said, session_created

_turns_finish = _browser._turns_finish
browser = _browser.browser
new_page = _browser.new_page
screenshots = _browser.screenshots
scripted_server = _browser.scripted_server

pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed")


@pytest.mark.parametrize("width", [800, 1440])
def test_export_downloads_the_session_document_at_800_and_1440_px(
    new_page: Any, scripted_server: Any, screenshots: Path, width: int
) -> None:
    page = logged_in(new_page, scripted_server)
    page.set_viewport_size({"width": width, "height": 900})
    url = session_created(page, scripted_server, f"Export at {width} px")
    said(page, "remember: the Q3 gap is in EMEA")
    button = page.locator("#message-form [data-export-session]")
    button.scroll_into_view_if_needed()
    box = button.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.locator("#message-form").screenshot(path=screenshots / f"session-export-{width}.png")
    with page.expect_download() as download_info:
        button.click()
    download = download_info.value
    session_id = url.rstrip("/").split("/")[-1].split("?")[0]
    assert download.suggested_filename == f"session-{session_id}.json"
    document = json.loads(Path(download.path()).read_text())
    assert document["format"] == "palimpsest.session/1"
    assert document["session"]["session"]["id"] == session_id
    assert document["session"]["session"]["title"] == f"Export at {width} px"
    assert document["session"]["session"]["notepad"] == "the Q3 gap is in EMEA\n"
    # The page is still there: a download does not navigate.
    assert page.url == url
