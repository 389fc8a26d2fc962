"""The Agents section in a real browser (chromium, Playwright, a real daphne), at 800 and 1440 px:
nothing makes a page wider than the window, nothing a model wrote runs (the learned text and
a skill carry a script and an image with `onerror`), and the operator's actions work end to end:
a new agent, its instructions edited, its learned text restored and edited, its state added to,
edited and deleted from, a skill written, edited, restored, deleted, exported and imported, a
session of it ended.

The agent's knowledge is seeded in the server's database the way its sessions' tools leave it
(`tests/dashboard/agent_data.py`); those tools are a feature of their own.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.dashboard import test_browser as _browser
from tests.dashboard.test_browser import CHROMIUM, Server, logged_in
from tests.servers import manage, server_env

# test_browser.py's fixtures, used here as they are (a daphne of this module's own).
_turns_finish = _browser._turns_finish
browser = _browser.browser
new_page = _browser.new_page
screenshots = _browser.screenshots

pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed")

WIDTHS = [800, 1440]
PWNED = "window.pwned"

SEED = """
from sessions_app import services
from sessions_app.engine import sessions as engine_sessions
from sessions_app.engine.features import features
from tests.dashboard.agent_data import agent_new, learned_write, skill_write, state_set

token = services.agent_token_create(name="terminal-chat")[0]
for width in {widths}:
    agent = agent_new(
        f"auditor-{{width}}", owner_name="terminal-chat", instructions="You audit quarterly reports."
    )
    learned_write(agent, "- the totals are in **table 4**\\n")
    learned_write(
        agent,
        "- garbled <script>window.pwned=1</script><img src=x onerror=\\"window.pwned=2\\">\\n"
        + "- " + "averyveryverylongwordwithoutanyspace" * 8 + "\\n",
    )
    skill_write(
        agent,
        "pdf-tables",
        "Read tables out of PDF reports",
        "# Steps\\n1. open the PDF\\n2. <script>window.pwned=3</script>**read** the table\\n"
        + "```\\n" + "x" * 400 + "\\n```\\n",
    )
    state_set(agent, "reports/q3/" + "k" * 150, {{"checked": True, "notes": "y" * 3000}})
    state_set(agent, "last-run", "2026-11-27")
    engine_sessions.session_create(
        owner=token,
        agent=agent,
        title=f"Audit at {{width}} px",
        reserved_tool_names=features().tool_names(),
    )
"""


@pytest.fixture(scope="module")
def agents_server(tmp_path_factory: Any) -> Iterator[Server]:
    tmp: Path = tmp_path_factory.mktemp("agents")
    for server in _browser._serve(tmp):
        manage(
            "shell",
            "-c",
            SEED.format(widths=WIDTHS),
            env=server_env(PALIMPSEST_SQLITE_PATH=str(tmp / "browser.sqlite3")),
        )
        yield server


def fits(page: Any, width: int) -> None:
    assert page.evaluate("document.documentElement.scrollWidth") <= width, page.url
    assert page.evaluate(PWNED) is None, page.url


@pytest.mark.parametrize("width", WIDTHS)
def test_the_agents_section_at_800_and_1440_px(new_page, agents_server, screenshots, width):
    page = logged_in(new_page, agents_server)
    page.set_viewport_size({"width": width, "height": 900})
    name = f"auditor-{width}"

    # The list, reached from the nav.
    page.click(".topnav a:has-text('Agents')")
    row = page.locator(f"tr.agent-row[data-agent='{name}']")
    assert row.locator("td[data-col=owner]").inner_text() == "client terminal-chat"
    assert row.locator("td[data-col=sessions]").inner_text() == "1"
    assert row.locator("td[data-col=versions]").inner_text() == "instructions v1 · learned v2"
    fits(page, width)

    # A new agent: a bad name is a form error, a good one opens its page.
    page.click("summary:has-text('New agent')")
    page.fill("#id_name", "Bad Name")
    page.click("button:has-text('Create agent')")
    page.wait_for_selector("[data-field=name] .field-error:has-text('lowercase letters')")
    page.fill("#id_name", f"fresh-{width}")
    page.fill("#id_instructions", "You are new here.")
    page.click("button:has-text('Create agent')")
    page.wait_for_url(re.compile(r".*/agents/\d+/$"))
    assert "You are new here." in page.locator("#instructions-text").inner_text()

    # The agent's page: its learned text rendered, sanitized; its skill, state and session.
    page.goto(agents_server.url + "/agents/")
    page.click(f"tr.agent-row[data-agent='{name}'] a")
    page.wait_for_selector("#agent-learned .agent-learned-text")
    agent_url = page.url
    assert page.locator("#agent-learned li").first.inner_text() == "garbled"
    assert page.locator("#agent-learned img, #agent-learned script").count() == 0
    assert page.locator("#agent-skills tr.skill-row").count() == 1
    assert page.locator("#agent-state tr.state-row").count() == 2
    fits(page, width)
    page.screenshot(path=screenshots / f"agent-{width}.png", full_page=True)

    # Its instructions edited: a new version by this operator.
    page.click("#agent-instructions button:has-text('Edit')")
    page.fill("#instructions-editor textarea", "You audit quarterly reports.\nCheck the totals first.")
    page.click("#instructions-editor button:has-text('Save')")
    page.wait_for_selector("#agent-instructions .saved:has-text('Saved as version 2')")
    assert "Check the totals first." in page.locator("#instructions-text").inner_text()

    # Its learned text: version 1 restored as version 3.
    page.click("a:has-text('History, diffs and restore')")
    page.click("#memory-history li[data-version='1'] a")
    page.wait_for_selector("h2:has-text('Version 1')")
    fits(page, width)
    page.click("button:has-text('Restore this version')")
    page.wait_for_selector("#memory-history .saved:has-text('Restored version 1 as version 3.')")
    assert "restore of v1" in page.locator("#memory-history li[data-version='3']").inner_text()
    fits(page, width)

    # A skill: every version, its body as sanitized markdown.
    page.goto(agent_url + "skills/pdf-tables/")
    page.wait_for_selector(".skill-body strong:has-text('read')")
    assert page.locator(".skill-body script").count() == 0
    fits(page, width)
    page.screenshot(path=screenshots / f"agent-skill-{width}.png", full_page=True)

    page.on("dialog", lambda dialog: dialog.accept())  # the deletes' and the end's confirmations

    # The learned text edited by the operator, a new version.
    page.goto(agent_url)
    page.click("#agent-learned button:has-text('Edit')")
    page.fill("#learned-editor textarea", "- the totals are in **table 5**")
    fits(page, width)
    page.click("#learned-editor button:has-text('Save')")
    page.wait_for_selector("#agent-learned .saved:has-text('Saved as version 4')")
    assert page.locator("#agent-learned .agent-learned-text strong").inner_text() == "table 5"

    # State: a key added, one edited (bad JSON first), one deleted.
    page.click("#agent-state button:has-text('Add a key')")
    page.fill("#state-editor input[name=key]", "added")
    page.fill("#state-editor textarea", "{not json")
    page.click("#state-editor button:has-text('Save')")
    page.wait_for_selector("#state-editor .error-text:has-text('Not JSON')")
    page.fill("#state-editor textarea", '{"n": 1}')
    page.click("#state-editor button:has-text('Save')")
    page.wait_for_selector("#agent-state .saved:has-text('Saved \"added\" as version 1.')")
    page.click("#agent-state tr[data-key='last-run'] button:has-text('Edit')")
    page.fill("#state-editor textarea", '"2026-11-28"')
    fits(page, width)
    page.screenshot(path=screenshots / f"agent-state-editor-{width}.png", full_page=True)
    page.click("#state-editor button:has-text('Save')")
    page.wait_for_selector("#agent-state .saved:has-text('as version 2.')")
    page.click("#agent-state tr[data-key='added'] button:has-text('Delete')")
    page.wait_for_selector("#agent-state .saved:has-text('Deleted \"added\".')")
    assert page.locator("#agent-state tr.state-row").count() == 2

    # Skills: a new one, edited, a version restored, deleted; then imported from the export.
    page.click("#agent-skills button:has-text('New skill')")
    page.fill("#skill-editor input[name=name]", "triage")
    page.fill("#skill-editor textarea[name=description]", "Sort the reports")
    page.fill("#skill-editor textarea[name=content]", "# Triage\n1. **bugs** first")
    fits(page, width)
    page.screenshot(path=screenshots / f"agent-skill-editor-{width}.png", full_page=True)
    page.click("#skill-editor button:has-text('Save')")
    page.wait_for_url(re.compile(r".*/skills/triage/\?version=1$"))
    page.click(".skill-actions button:has-text('Edit')")
    page.fill("#skill-editor textarea[name=content]", "# Triage\n1. **security** first")
    fits(page, width)
    page.screenshot(path=screenshots / f"agent-skill-page-editor-{width}.png", full_page=True)
    page.click("#skill-editor button:has-text('Save')")
    page.wait_for_url(re.compile(r".*/skills/triage/\?version=2$"))
    assert page.locator(".skill-body strong").inner_text() == "security"
    page.click("#memory-history li[data-version='1'] a")
    page.click("button:has-text('Restore this version')")
    page.wait_for_url(re.compile(r".*/skills/triage/\?version=3$"))
    assert page.locator(".skill-body strong").inner_text() == "bugs"
    fits(page, width)
    exported = page.request.get(agent_url + "skills.zip")
    assert exported.headers["content-type"] == "application/zip"
    page.click(".skill-actions button:has-text('Delete')")
    page.wait_for_url(agent_url)
    assert page.locator("#agent-skills tr.skill-row").count() == 1
    page.set_input_files(
        "#agent-skills input[type=file]",
        files=[{"name": "skills.zip", "mimeType": "application/zip", "buffer": exported.body()}],
    )
    page.click("#agent-skills button:has-text('Import')")
    page.wait_for_selector("#agent-skills .saved:has-text('Imported 2 skill(s): pdf-tables, triage.')")
    assert page.locator("#agent-skills tr.skill-row").count() == 2
    fits(page, width)

    # Its session: named and linked from the session page, and ended from there.
    page.goto(agent_url)
    page.click(f"#agent-sessions a:has-text('Audit at {width} px')")
    page.wait_for_selector("#live-dot.live")
    assert page.locator(f".session-meta a.agent-link:has-text('agent {name}')").count() == 1
    assert "client terminal-chat" in page.locator(".session-meta").inner_text()
    page.click("#message-form button:has-text('End session')")
    page.wait_for_selector("#message-form.ended-box:has-text('This session has ended')")
    page.wait_for_selector("#session-status.status-ended")
    assert page.locator("#id_content").count() == 0
    fits(page, width)
    page.reload()
    page.wait_for_selector("#message-form.ended-box")
    assert page.locator("#id_content").count() == 0
    page.click(".session-meta a.agent-link")
    page.wait_for_selector("#agent-sessions .badge.status-ended")
