"""Screenshots of the dashboard for the README: the session page at 1440 and 800 px wide.

Drives Debian's chromium with Playwright against a running server (`make run`), as an operator
would: logs in, creates a session with the new-session form, has a few scripted-model turns with
tool calls, and saves the pictures under docs/screenshots/.

    make run PORT=8012 &                       # in another terminal
    .venv/bin/python scripts/screenshots.py --url http://127.0.0.1:8012

The password is read from .local/operator-password (written by `make run`'s first start).
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
TURNS = [
    "remember: the Q3 totals in **table 4** do not add up",
    "plan: re-add table 4; find the wrong cell; write the summary",
    "run: rows = [120, 340, 95, 410]\nprint('sum', sum(rows))\nprint('max', max(rows))",
    'tool count_words {"text": "The quarterly report lists four regions and their totals"}',
    "ref: reports/q3.xlsx#table4",
    "What have we found so far?",
]
TURN_TIMEOUT_MS = 30_000


def log_in(page: Page, url: str, user: str, password: str) -> None:
    page.goto(url + "/")
    page.fill("#id_username", user)
    page.fill("#id_password", password)
    page.click("button:has-text('Log in')")
    page.wait_for_url(url + "/")


# How many turns of the session have completed, from its timeline (kept live on the page).
TURNS_COMPLETED = (
    "Array.from(document.querySelectorAll('#timeline-rows .tl-row .type'))"
    ".filter((t) => t.textContent === 'turn.completed').length"
)


def turn(page: Page, message: str) -> None:
    """Send a message and wait until its turn has completed."""
    before = page.evaluate(TURNS_COMPLETED)
    page.fill("#id_content", message)
    page.click("#message-form button:has-text('Send')")
    page.wait_for_function(f"{TURNS_COMPLETED} > {before}", timeout=TURN_TIMEOUT_MS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--user", default="admin")
    parser.add_argument("--password-file", type=Path, default=ROOT / ".local" / "operator-password")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    args = parser.parse_args()
    password = args.password_file.read_text().strip()
    args.out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.set_default_timeout(TURN_TIMEOUT_MS)
        log_in(page, args.url, args.user, password)
        page.click("summary:has-text('New session')")
        page.fill("#id_title", "Q3 report audit")
        page.fill("#id_system_prompt", "You audit quarterly reports. Be precise and cite the cell.")
        page.screenshot(path=args.out / "new-session-form.png")
        page.click("button:has-text('Create session')")
        page.wait_for_url("**/sessions/*/")
        page.wait_for_selector("#live-dot.live")
        for message in TURNS:
            turn(page, message)
        # Open the sandbox run's call and result, so the picture shows how tool calls read.
        opened = "#transcript details:is(.tool-call, .tool-result):has-text('run_sandbox_code')"
        for details in page.locator(opened).all():
            details.evaluate("(el) => { el.open = true; }")
        page.locator(opened).first.scroll_into_view_if_needed()
        page.click("[data-tab-button=context]")
        page.screenshot(path=args.out / "session-1440.png")
        page.set_viewport_size({"width": 800, "height": 900})
        page.click("[data-tab-button=transcript]")
        page.screenshot(path=args.out / "session-800.png")
        page.click("[data-tab-button=context]")
        page.screenshot(path=args.out / "session-800-context.png")
        browser.close()
    for name in ("new-session-form", "session-1440", "session-800", "session-800-context"):
        print(args.out / f"{name}.png")


if __name__ == "__main__":
    main()
