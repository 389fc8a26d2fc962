"""The dashboard in a real browser: Debian's chromium driven by Playwright against a real daphne.

Plain sync tests (Playwright's sync API cannot run inside an event loop); the server has its own
SQLite database, so no Django test database is involved. Screenshots of the main pages go to
PALIMPSEST_SCREENSHOTS_DIR when it is set (`docs/screenshots/` for the README), else to a
temporary folder.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.fake_anthropic import FakeAnthropicServer, text
from tests.servers import Daphne, manage, server_env

sync_api = pytest.importorskip("playwright.sync_api")

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
OPERATOR, PASSWORD = "operator", "operator-password-1"
VIEWPORT = {"width": 1440, "height": 900}
TURN_TIMEOUT_MS = 20_000

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed")


@pytest.fixture(autouse=True)
def _turns_finish() -> None:
    """Replaces the suite's async autouse fixture of that name: the turns run in the server's
    process here, and an asyncio fixture cannot run while Playwright's sync API holds its loop."""


@dataclass
class Server:
    url: str
    fake: FakeAnthropicServer | None = None


def _serve(tmp: Path, **env_overrides: str) -> Iterator[Server]:
    env = server_env(
        PALIMPSEST_SQLITE_PATH=str(tmp / "browser.sqlite3"),
        PALIMPSEST_SCRIPTED_CHUNK_DELAY_SECONDS="0.05",
        **env_overrides,
    )
    manage("migrate", "--noinput", env=env)
    manage(
        "createsuperuser",
        "--noinput",
        "--username",
        OPERATOR,
        "--email",
        "operator@example.com",
        env={**env, "DJANGO_SUPERUSER_PASSWORD": PASSWORD},
    )
    with Daphne(env, tmp / "daphne.log") as server:
        yield Server(url=f"http://127.0.0.1:{server.port}")


@pytest.fixture(scope="module")
def scripted_server(tmp_path_factory: Any) -> Iterator[Server]:
    """Daphne with the scripted model, streaming slowly enough to watch, and a shared folder."""
    tmp = tmp_path_factory.mktemp("scripted")
    shared = tmp / "shared"
    shared.mkdir()
    lines = [f"INFO 2026-04-26 10:{i // 60 % 60:02d}:{i % 60:02d} event number {i}\n" for i in range(3000)]
    (shared / "big.log").write_text("".join(lines) + "ERROR 2026-04-26 23:59:59 LAST_CRITICAL_EVENT\n")
    yield from _serve(tmp, PALIMPSEST_FS_ROOT=str(shared))


@pytest.fixture(scope="module")
def anthropic_server(tmp_path_factory: Any) -> Iterator[Server]:
    """Daphne talking to the fake Messages API, so a test can read exactly what the model got."""
    tmp = tmp_path_factory.mktemp("anthropic")
    with FakeAnthropicServer(chunk_delay_seconds=0.02) as fake:
        fake.default_reply = text("Noted: I will keep that in mind.")
        for server in _serve(
            tmp, PALIMPSEST_PROVIDER="anthropic", ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=fake.url
        ):
            server.fake = fake
            yield server


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory: Any) -> Path:
    folder = os.environ.get("PALIMPSEST_SCREENSHOTS_DIR")
    path = Path(folder) if folder else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def new_page(browser: Any) -> Iterator[Any]:
    """`new_page()` → a page in a fresh browser context, closed (with its sockets) after the test."""
    contexts: list[Any] = []

    def make() -> Any:
        context = browser.new_context(viewport=VIEWPORT)
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(TURN_TIMEOUT_MS)
        return page

    yield make
    for context in contexts:
        context.close()


def logged_in(new_page: Any, server: Server) -> Any:
    page = new_page()
    page.goto(server.url + "/")
    page.fill("#id_username", OPERATOR)
    page.fill("#id_password", PASSWORD)
    page.click("button:has-text('Log in')")
    page.wait_for_url(server.url + "/")
    return page


def session_created(page: Any, server: Server, title: str, **fields: str) -> str:
    """Create a session from the list page's form; returns its page's URL."""
    page.goto(server.url + "/")
    page.click("summary:has-text('New session')")
    page.fill("#id_title", title)
    for name, value in fields.items():
        page.fill(f"#id_{name}", value)
    page.click("button:has-text('Create session')")
    page.wait_for_url(re.compile(r".*/sessions/[0-9a-f-]{36}/(\?.*)?$"))
    page.wait_for_selector("#live-dot.live")
    return page.url


# The seq of the latest turn.completed in the timeline (the newest rows are never trimmed).
LAST_TURN_COMPLETED = (
    "Math.max(0, ...Array.from(document.querySelectorAll('#timeline-rows .tl-row'))"
    ".filter((r) => r.querySelector('.type').textContent === 'turn.completed')"
    ".map((r) => parseInt(r.querySelector('.seq').textContent.slice(1))))"
)


def said(page: Any, message: str) -> None:
    """Send a message from the message box and wait until its turn has completed."""
    before = page.evaluate(LAST_TURN_COMPLETED)
    page.fill("#id_content", message)
    page.click("#message-form button:has-text('Send')")
    page.wait_for_function(f"{LAST_TURN_COMPLETED} > {before}")


def tab(page: Any, name: str) -> None:
    page.click(f"[data-tab-button={name}]")


def test_log_in_create_a_session_and_watch_the_reply_stream_in(new_page, scripted_server, screenshots):
    anonymous = new_page()
    anonymous.goto(scripted_server.url + "/")
    assert "/accounts/login/" in anonymous.url
    anonymous.screenshot(path=screenshots / "login.png")

    page = logged_in(new_page, scripted_server)
    session_url = session_created(page, scripted_server, "Streaming demo")
    session_id = re.search(r"/sessions/([0-9a-f-]{36})/", session_url).group(1)  # type: ignore[union-attr]
    watcher = logged_in(new_page, scripted_server)  # the session list, open in another tab
    watcher.wait_for_selector("#live-dot.live")

    words = " ".join(f"word{i}" for i in range(1, 21))
    page.fill("#id_content", f"echo {words}")
    page.click("#message-form button:has-text('Send')")
    # Part of the reply is on screen before the whole of it.
    page.wait_for_function(
        "() => { const t = document.getElementById('streaming-text').textContent;"
        " return t.includes('word3') && !t.includes('word20'); }"
    )
    watcher.wait_for_selector(f"#session-row-{session_id} .badge.status-running")
    page.wait_for_selector(f"#transcript article.msg.assistant:has-text('{words}')")
    page.wait_for_selector("#session-status.status-idle")
    assert page.locator("#streaming").is_hidden()
    watcher.wait_for_selector(f"#session-row-{session_id} .badge.status-idle")
    assert watcher.locator(f"#session-row-{session_id} td.num").first.inner_text() == "2"  # messages

    said(page, "remember: the Q3 totals in **table 4** are wrong")
    said(page, "plan: check totals; fix table 4; write the summary")
    said(page, 'tool count_words {"text": "one two three"}')
    page.screenshot(path=screenshots / "session.png")
    tab(page, "timeline")
    page.wait_for_selector("#timeline-rows .tl-row:has-text('turn.completed')")
    page.screenshot(path=screenshots / "timeline.png")


def test_context_gauge_and_prompt_inspector_show_the_last_request(new_page, scripted_server, screenshots):
    page = logged_in(new_page, scripted_server)
    session_created(page, scripted_server, "Inspector demo", system_prompt="You audit quarterly reports.")
    said(page, "remember: deadline is Friday")
    said(page, "ref: reports/q3.xlsx")
    tab(page, "context")
    history = int(page.locator("#gauge tr[data-part=history] td.num").first.inner_text())
    assert history > 0
    page.screenshot(path=screenshots / "context-gauge.png")
    tab(page, "inspector")
    page.wait_for_selector("#inspector .stats")
    assert page.locator("#inspector .breakpoint").count() == 2
    assert "You audit quarterly reports." in page.locator("#inspector").inner_text()
    page.screenshot(path=screenshots / "prompt-inspector.png")
    # The inspector follows the latest request live; what the model wrote stays text.
    first = page.locator("#inspector .step-title").inner_text()
    said(page, 'echo <img src=x onerror="window.pwned=1"><script>window.pwned=2</script> again')
    page.wait_for_function(
        "(first) => document.querySelector('#inspector .step-title').textContent.trim() !== first",
        arg=first.strip(),
    )
    assert page.evaluate("window.pwned") is None
    assert "<script>window.pwned=2</script>" in page.locator("#transcript .msg.user").last.inner_text()


def test_edited_notepad_is_in_the_models_next_request(new_page, anthropic_server, screenshots):
    assert anthropic_server.fake is not None
    page = logged_in(new_page, anthropic_server)
    session_created(page, anthropic_server, "Notepad demo")
    tab(page, "notepad")
    page.click("#notepad-panel button:has-text('Edit')")
    page.fill("#notepad-editor textarea", "## Facts\n- the deadline is **Friday**\n")
    page.click("#notepad-editor button:has-text('Save')")
    page.wait_for_selector("#notepad-editor .saved:has-text('Saved as version 1')")
    page.wait_for_selector("#notepad-view strong:has-text('Friday')")
    said(page, "When is the deadline?")
    page.wait_for_selector("#transcript article.msg.assistant:has-text('Noted')")
    system = anthropic_server.fake.requests[-1].body["system"]
    assert system[-1]["text"] == "## Session Notepad\n## Facts\n- the deadline is **Friday**\n"


def test_notepad_conflict_is_shown_and_nothing_is_overwritten(new_page, scripted_server, screenshots):
    page = logged_in(new_page, scripted_server)
    session_created(page, scripted_server, "Conflict demo")
    said(page, "remember: first finding")
    tab(page, "notepad")
    page.click("#notepad-panel button:has-text('Edit')")
    page.fill("#notepad-editor textarea", "operator's rewrite of the notes\n")
    said(page, "remember: the agent wrote this meanwhile")  # the agent changes it while we edit
    page.wait_for_selector("#notepad-live-notice:has-text('now version 2 by agent')")
    page.click("#notepad-editor button:has-text('Save')")
    page.wait_for_selector("#notepad-editor .conflict")
    assert "the agent wrote this meanwhile" in page.locator("#notepad-editor .conflict-current").inner_text()
    assert page.locator("#notepad-editor textarea").input_value() == "operator's rewrite of the notes\n"
    assert "the agent wrote this meanwhile" in page.locator("#notepad-view").inner_text()
    page.screenshot(path=screenshots / "notepad-conflict.png")
    page.click("#notepad-editor button:has-text('Replace with my text')")
    page.wait_for_selector("#notepad-editor .saved:has-text('Saved as version 3')")
    assert "operator's rewrite" in page.locator("#notepad-view").inner_text()


def test_step_through_the_archives(new_page, scripted_server, screenshots):
    page = logged_in(new_page, scripted_server)
    # 3,600: the tools' definitions are about 2,000 tokens (`scratchpad_read` is offered from the
    # start), and the first compaction must come after the first message is noted.
    session_created(page, scripted_server, "Archive demo", context_window="3600", compact_threshold="0.6")
    said(page, "remember: keep this across compactions")
    for index in range(12):
        if page.locator("#transcript .marker.compaction").count() >= 2:
            break
        # A long message and a long tool input, with short replies: the context fills up fast.
        filler = f"message {index} " + "filler words " * 30
        said(page, f'tool count_words {{"text": "{filler}"}}')
    assert page.locator("#transcript .marker.compaction").count() >= 2
    tab(page, "archives")
    page.wait_for_selector("#archive-panel .stepper")
    latest = page.locator("#archive-panel .step-title").inner_text()
    count = int(re.search(r"of (\d+)", latest).group(1))  # type: ignore[union-attr]
    assert latest.startswith(f"Compaction {count} of {count}")
    page.click("[data-archive-step=previous]")
    page.wait_for_selector(f"#archive-panel .step-title:has-text('Compaction {count - 1} of {count}')")
    assert "epoch=" in page.url and "tab=archives" in page.url
    assert page.locator("#archive-panel .archived-messages .msg").count() > 0
    assert "keep this across compactions" in page.locator("#archive-notepad").inner_text()
    page.screenshot(path=screenshots / "archive-stepper.png")
    page.click("[data-archive-step=next]")
    page.wait_for_selector(f"#archive-panel .step-title:has-text('Compaction {count} of {count}')")
    # A bookmarked step opens where it was.
    page.goto(page.url.split("?")[0] + "?tab=archives&epoch=0")
    page.wait_for_selector(f"#archive-panel .step-title:has-text('Compaction 1 of {count}')")


def test_observation_browser_greps_an_offloaded_log(new_page, scripted_server, screenshots):
    page = logged_in(new_page, scripted_server)
    session_created(page, scripted_server, "Observation demo")
    said(page, "read big.log")
    tab(page, "observations")
    page.wait_for_selector("#observation-list a.mono")
    page.click("#observation-list a.mono")
    page.wait_for_selector("#observation-viewer .obs-content")
    page.select_option("#observation-viewer select[name=mode]", "grep")
    page.fill("#observation-viewer input[name=pattern]", "ERROR")
    page.fill("#observation-viewer input[name=context]", "2")
    page.click("#observation-viewer button:has-text('Read')")
    page.wait_for_selector("#observation-viewer .obs-content:has-text('3001:ERROR')")
    assert "2999-INFO" in page.locator("#observation-viewer .obs-content").inner_text()
    page.screenshot(path=screenshots / "observations.png")
    page.goto(scripted_server.url + "/")  # every session of this module's tests
    page.screenshot(path=screenshots / "sessions.png")


def test_a_parent_page_leads_to_its_sub_session_and_back(new_page, scripted_server, screenshots):
    page = logged_in(new_page, scripted_server)
    parent_url = session_created(page, scripted_server, "Delegation demo")
    said(page, "spawn echo 42")
    # Live: the child's start is marked in the transcript, the family block lists what it returned.
    page.wait_for_selector("#transcript .marker.spawned a.child-link")
    page.wait_for_selector("#session-family .child-row .outcome-reported")
    page.screenshot(path=screenshots / "subsessions.png")
    page.click("#session-family [data-child-link]")
    page.wait_for_url(re.compile(r".*/sessions/[0-9a-f-]{36}/$"))
    child_url = page.url
    assert child_url != parent_url
    page.wait_for_selector("#transcript article.msg.assistant:has-text('42')")
    assert "report_result" in page.locator("#transcript").inner_text()
    page.click("#session-family [data-parent-link]")
    page.wait_for_url(parent_url)
    # From the list: the root's collapsed tree opens onto the child.
    page.goto(scripted_server.url + "/")
    row = page.locator(f"#session-row-{parent_url.rstrip('/').split('/')[-1]}")
    assert row.locator("details.subtree").get_attribute("open") is None
    row.locator("details.subtree summary").click()
    row.locator("[data-subtree-link]").click()
    page.wait_for_url(child_url)
    page.wait_for_selector("#session-family [data-parent-link]:has-text('Delegation demo')")


def test_notepad_restore_from_history_with_a_conflict(new_page, scripted_server, screenshots):
    page = logged_in(new_page, scripted_server)
    session_url = session_created(page, scripted_server, "History demo").split("?")[0]
    said(page, "remember: the totals are in table 4")
    said(page, "forget: the totals are in table 4")
    history = logged_in(new_page, scripted_server)
    history.goto(session_url + "notepad/history/")
    history.click(".history-list li[data-version='1'] a")
    history.wait_for_selector("#history-detail h2:has-text('Version 1')")
    assert "the totals are in table 4" in history.locator("table.diff tr.diff-added").inner_text()
    history.click("[data-against=current]")
    history.wait_for_selector("h3.diff-title:has-text('to the current text (version 2)')")
    assert "table 4" in history.locator("table.diff tr.diff-removed").inner_text()
    history.screenshot(path=screenshots / "notepad-history.png")
    # The agent writes while the operator looks at version 1: restoring it must not overwrite that.
    said(page, "remember: the agent wrote this meanwhile")
    history.click("button:has-text('Restore this version')")
    history.wait_for_selector("#restore-editor .conflict")
    assert (
        "the agent wrote this meanwhile" in history.locator("#restore-editor .conflict-current").inner_text()
    )
    assert history.locator("#restore-editor textarea").input_value() == "the totals are in table 4\n"
    history.screenshot(path=screenshots / "notepad-restore-conflict.png")
    tab(page, "notepad")
    assert "the agent wrote this meanwhile" in page.locator("#notepad-view").inner_text()
    # Merging by hand, then saving: a new version by the operator, seen live on the session page.
    history.fill(
        "#restore-editor textarea", "- the totals are in table 4\n- the agent wrote this meanwhile\n"
    )
    history.click("#restore-editor button:has-text('Replace with my text')")
    history.wait_for_selector(".saved:has-text('Saved your text as version 4 (restoring version 1).')")
    assert "operator" in history.locator(".history-list li[data-version='4']").inner_text()
    page.wait_for_selector("#notepad-view:has-text('Version 4')")
    assert "table 4" in page.locator("#notepad-view").inner_text()


def test_usage_panel_updates_live_after_a_turn(new_page, anthropic_server, screenshots):
    fake = anthropic_server.fake
    assert fake is not None
    page = logged_in(new_page, anthropic_server)
    session_url = session_created(page, anthropic_server, "Usage demo")
    session_id = re.search(r"/sessions/([0-9a-f-]{36})/", session_url).group(1)  # type: ignore[union-attr]
    watcher = logged_in(new_page, anthropic_server)  # the session list in another tab
    watcher.wait_for_selector("#live-dot.live")
    tab(page, "context")
    assert page.locator("#usage-panel [data-usage=calls]").inner_text() == "0"
    before = len(fake.requests)
    said(page, "What is in table 4?")
    page.wait_for_selector("#usage-panel [data-usage=calls]:has-text('1')")
    said(page, "And in table 5?")
    page.wait_for_selector("#usage-panel [data-usage=calls]:has-text('2')")
    sent = [request.usage for request in fake.requests[before:]]
    assert len(sent) == 2 and all(usage is not None for usage in sent)

    def shown(kind: str) -> int:
        return int(page.locator(f"#usage-panel tr[data-usage={kind}] td.num").first.inner_text())

    assert shown("input") == sum(u["input_tokens"] for u in sent)  # type: ignore[index]
    assert shown("cache_write") == sum(u["cache_creation_input_tokens"] for u in sent)  # type: ignore[index]
    assert shown("cache_read") == sum(u["cache_read_input_tokens"] for u in sent) > 0  # type: ignore[index]
    assert shown("output") == sum(u["output_tokens"] for u in sent)  # type: ignore[index]
    assert page.locator("#usage-panel [data-usage=cost]").inner_text().startswith("$")
    assert page.locator("#usage-panel [data-usage=cache_hit]").inner_text() != "–"
    page.locator("#usage-panel").screenshot(path=screenshots / "usage-panel.png")
    # The list's row followed the turns live.
    cost = page.locator("#usage-panel [data-usage=cost]").inner_text()
    watcher.wait_for_selector(f"#session-row-{session_id} td[data-col=cost]:text-is('{cost}')")


# ---------------------------------------------------------------------------
# Issue 14: the operator's dashboard, tried as a new operator would
# ---------------------------------------------------------------------------
def test_the_gauges_sections_sum_to_its_estimate_and_system_counts_the_guidance(new_page, scripted_server):
    page = logged_in(new_page, scripted_server)
    session_created(page, scripted_server, "Gauge demo")  # no system prompt of its own
    said(page, "remember: the gauge must add up")
    tab(page, "context")
    cells = page.locator("#gauge tr[data-part] td.num.mono")
    parts = {
        row.get_attribute("data-part"): int(row.locator("td.num.mono").inner_text())
        for row in page.locator("#gauge tr[data-part]").all()
    }
    assert cells.count() == len(parts) == 5
    assert sum(parts.values()) == int(page.locator("#gauge-estimated").inner_text())
    assert parts["system"] > 200  # every feature's guidance, with no system prompt at all
    assert parts["notepad"] > 0 and parts["history"] > 0 and parts["tools"] > 0


def test_the_new_session_form_has_a_field_for_each_setting(new_page, scripted_server, screenshots):
    page = logged_in(new_page, scripted_server)
    page.click("summary:has-text('New session')")
    assert page.locator("#id_setting__notepad__enabled").is_checked()
    page.fill("#id_title", "Form demo")
    page.uncheck("#id_setting__scratchpad__enabled")
    page.click("summary:has-text('Settings of each feature')")
    page.select_option("#id_setting__notepad__position", "message")
    page.fill("#id_setting__scratchpad__notes_max_chars", "0")
    page.screenshot(path=screenshots / "new-session-form-error.png")
    page.click("button:has-text('Create session')")
    error = page.locator("[data-field=setting__scratchpad__notes_max_chars] .field-error")
    error.wait_for()
    assert "greater than or equal to 1" in error.inner_text()
    # What was typed is still there; fixing the field creates the session.
    assert page.locator("#id_title").input_value() == "Form demo"
    assert not page.locator("#id_setting__scratchpad__enabled").is_checked()
    page.fill("#id_setting__scratchpad__notes_max_chars", "1500")
    page.click("button:has-text('Create session')")
    page.wait_for_url(re.compile(r".*/sessions/[0-9a-f-]{36}/$"))
    session_id = re.search(r"/sessions/([0-9a-f-]{36})/", page.url).group(1)  # type: ignore[union-attr]
    page.goto(f"{scripted_server.url}/admin/sessions_app/agentsession/{session_id}/change/")
    settings = json.loads(page.locator("#id_settings").input_value())
    assert settings["scratchpad"]["enabled"] is False and settings["scratchpad"]["notes_max_chars"] == 1500
    assert settings["notepad"] == {"enabled": True, "position": "message", "history_max_chars": 2_000_000}


def test_at_800_px_the_panels_are_tabs_over_the_transcript(new_page, scripted_server, screenshots):
    page = logged_in(new_page, scripted_server)
    page.set_viewport_size({"width": 800, "height": 900})
    session_created(page, scripted_server, "Narrow demo")
    transcript, gauge = page.locator("#transcript"), page.locator("#gauge")
    assert transcript.is_visible() and not gauge.is_visible()  # it opens on the transcript
    said(page, "remember: narrow windows work")
    # Nothing is wider than the window.
    assert page.evaluate("document.documentElement.scrollWidth") <= 800
    box = transcript.bounding_box()
    assert box is not None and box["width"] > 700  # the transcript has the whole width
    page.screenshot(path=screenshots / "narrow-layout.png")
    tab(page, "context")
    assert gauge.is_visible() and not transcript.is_visible()
    assert gauge.bounding_box()["width"] > 700  # type: ignore[index]
    tab(page, "transcript")
    assert transcript.is_visible() and not gauge.is_visible()
    # Wider again: side by side, and the transcript tab is gone.
    page.set_viewport_size({"width": 1440, "height": 900})
    assert transcript.is_visible() and gauge.is_visible()
    assert page.locator("[data-tab-button=transcript]").is_hidden()


def test_keyboard_shortcuts_reach_the_common_actions(new_page, scripted_server):
    page = logged_in(new_page, scripted_server)
    page.keyboard.press("n")
    assert page.evaluate("document.activeElement.id") == "id_title"
    page.keyboard.type("Keys n demo")  # typing in a field triggers no shortcut
    assert page.locator("#id_title").input_value() == "Keys n demo"
    page.keyboard.press("Escape")
    assert page.locator(".new-session").get_attribute("open") is None
    session_created(page, scripted_server, "Keyboard demo")
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "id_content"
    page.keyboard.type("echo typed 123")  # the digits go into the box, not to the tabs
    page.keyboard.press("Control+Enter")
    page.wait_for_selector("#transcript article.msg.assistant:has-text('typed 123')")
    page.keyboard.press("Escape")
    page.keyboard.press("7")
    assert page.locator("#timeline").is_visible() and "tab=timeline" in page.url
    page.keyboard.press("2")
    assert page.locator("#notepad-panel").is_visible()
    page.keyboard.press("?")
    assert page.locator("#shortcuts").is_visible()
    page.keyboard.press("Escape")
    assert page.locator("#shortcuts").is_hidden()
    # x cancels a running turn: an answer long enough (~200 pieces, 10 s) that it is still
    # streaming when x comes, however quickly the server streams (300 words, ~1.5 s, were
    # sometimes done before the steps below).
    page.fill("#id_content", "echo " + " ".join(f"w{i}" for i in range(2000)))
    page.click("#message-form button:has-text('Send')")
    page.wait_for_selector("#session-status.status-running")
    # After sending, the box has the focus again, once the send's answer is swapped in. The
    # turn's "running" can come over the websocket before that answer: an x pressed before
    # the swap would be typed into the new box, not taken as the shortcut.
    page.wait_for_function(
        "document.activeElement && document.activeElement.id === 'id_content'"
        " && document.activeElement.value === ''"
    )
    # htmx done with that swap too (it settles after swapping): a click during it may be
    # dropped, and x would then send no cancel.
    page.wait_for_function("!document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling')")
    page.evaluate("document.activeElement.blur()")
    page.keyboard.press("x")
    page.wait_for_selector("#transcript .marker.turn-end:has-text('cancelled')")


def test_tool_calls_are_readable_and_long_ones_open_with_show_all(new_page, scripted_server):
    page = logged_in(new_page, scripted_server)
    session_created(page, scripted_server, "Tools demo")
    said(page, 'tool count_words {"text": "one two three"}')
    result = page.locator("#transcript details.tool-result").last
    result.locator("summary").click()
    assert '{\n  "lines": 1,\n  "words": 3,' in result.locator("pre").first.inner_text()
    said(page, "read big.log")
    read = page.locator("#transcript details.tool-result:has-text('fs_read')").last
    read.locator("summary").click()
    block = read.locator(".tool-block.clip").first
    clipped = block.locator("pre").bounding_box()["height"]  # type: ignore[index]
    block.locator("[data-show-all]").click()
    assert "open" in (block.get_attribute("class") or "")
    assert block.locator("pre").bounding_box()["height"] > clipped  # type: ignore[index]
    assert block.locator("[data-show-all]").inner_text() == "show less"


def test_the_timeline_folds_streamed_deltas_into_one_row(new_page, scripted_server):
    page = logged_in(new_page, scripted_server)
    session_created(page, scripted_server, "Timeline demo")
    tab(page, "timeline")
    assert page.locator("#timeline-rows .empty-timeline").is_visible()
    said(page, "echo " + " ".join(f"word{i}" for i in range(120)))  # streamed live, in pieces
    group = page.locator("#timeline-rows > [data-delta-group]").first
    count = int(group.locator("[data-delta-count]").inner_text())
    assert count > 2 and group.locator(".tl-group-rows > .tl-row").count() == count
    assert "word0 word1" in group.locator("[data-delta-text]").inner_text()
    assert page.locator("#timeline-rows .empty-timeline").is_hidden()  # "No events yet" went
    loose = page.evaluate(
        "Array.from(document.querySelectorAll('#timeline-rows > .tl-row.is-delta + .tl-row.is-delta')).length"
    )
    assert loose == 0
    # The same folding when the page is loaded afresh.
    page.reload()
    reloaded = page.locator("#timeline-rows > [data-delta-group]").first
    assert int(reloaded.locator("[data-delta-count]").inner_text()) == count


def test_no_page_asks_for_anything_that_is_not_there(new_page, scripted_server):
    page = logged_in(new_page, scripted_server)
    failed: list[str] = []
    page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    session_url = session_created(page, scripted_server, "Favicon demo")
    for url in (scripted_server.url + "/", session_url, scripted_server.url + "/admin/"):
        page.goto(url)
        page.wait_for_load_state("networkidle")
    assert failed == []
    icon = page.evaluate("document.querySelector('link[rel=icon]').href")
    assert page.request.get(icon).status == 200


@pytest.mark.parametrize("width", [800, 1440])
def test_the_session_list_is_usable_at_800_and_1440_px(new_page, scripted_server, screenshots, width):
    page = logged_in(new_page, scripted_server)
    session_created(page, scripted_server, f"List at {width} px with a long title of several words")
    said(page, "spawn echo 42")
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(scripted_server.url + "/")
    # The search box is a box to type in, not a sliver.
    assert page.locator("input[name=q]").bounding_box()["width"] >= 240  # type: ignore[index]
    # Nothing makes the page wider than the window; the table scrolls within it where it must.
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    for column in ("tokens", "cost"):
        cell = page.locator(f"#session-rows tr.session-row td[data-col={column}]").first
        cell.scroll_into_view_if_needed()
        box = cell.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, column
    # The sub-session tree reads as lines, not a word per line.
    row = page.locator("#session-rows tr.session-row:has(details.subtree)").first
    row.locator("details.subtree summary").click()
    link = row.locator("[data-subtree-link]").first
    link.wait_for()
    line = float(
        page.evaluate("(a) => parseFloat(getComputedStyle(a).lineHeight) || 20", link.element_handle())
    )
    assert link.bounding_box()["height"] < 2 * line  # type: ignore[index]
    title = row.locator("td.title-cell")
    assert title.bounding_box()["width"] >= 200  # type: ignore[index]
    page.screenshot(path=screenshots / f"session-list-{width}.png")


@pytest.mark.parametrize("width", [800, 1440])
def test_a_message_too_large_gets_a_form_error_and_keeps_the_text(new_page, scripted_server, width):
    page = logged_in(new_page, scripted_server)
    page.set_viewport_size({"width": width, "height": 900})
    session_url = session_created(page, scripted_server, f"Large message at {width} px")
    huge = 3 * 1024 * 1024
    # Over the box's limit (pasted in, or set by a script): refused before it is sent.
    page.evaluate(f"document.querySelector('#id_content').value = 'x'.repeat({huge})")
    page.click("#message-form button:has-text('Send')")
    page.wait_for_selector("#message-form .error-text:has-text('at most 200000 characters')")
    assert page.evaluate("document.querySelector('#id_content').value.length") == huge
    # Past the page's own check, the server refuses it the same way: the page and the text stay.
    page.evaluate(
        "(n) => { const box = document.querySelector('#id_content'); box.removeAttribute('maxlength');"
        " box.value = 'y'.repeat(n); document.querySelector('#message-form .error-text').remove(); }",
        huge,
    )
    page.click("#message-form button:has-text('Send')")
    page.wait_for_selector("#message-form .error-text:has-text('too large to send')")
    assert page.url == session_url
    assert page.evaluate("document.querySelector('#id_content').value.length") == huge
    assert page.locator("#transcript .msg.user").count() == 0
    box = page.locator("#message-form .error-text").bounding_box()
    assert box is not None and box["x"] + box["width"] <= width


@pytest.mark.parametrize("width", [800, 1440])
def test_timeline_types_fit_their_column_and_every_row_says_something(new_page, scripted_server, width):
    page = logged_in(new_page, scripted_server)
    page.set_viewport_size({"width": width, "height": 900})
    session_created(page, scripted_server, f"Timeline at {width} px")
    said(page, "remember: the timeline labels")
    page.on("dialog", lambda dialog: dialog.accept())
    page.click("#message-form button:has-text('Compact now')")
    tab(page, "timeline")
    page.wait_for_selector("#timeline-rows .tl-row:has-text('compaction.completed')")
    page.wait_for_selector("#timeline-rows .tl-row:has(.type:text-is('session.status'))")
    overflowing = page.evaluate(
        "Array.from(document.querySelectorAll('#timeline-rows .tl-row .type'))"
        ".filter((t) => t.scrollWidth > t.clientWidth).map((t) => t.textContent)"
    )
    assert overflowing == []
    for row in page.locator("#timeline-rows .tl-row:has(.type:text-is('session.status'))").all():
        assert row.locator(".sum").inner_text().strip()
