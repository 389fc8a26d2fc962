"""Sub-sessions in the dashboard: children under their root in the list (a collapsed tree), a
session page's parent and children, and the transcript's links to each child."""

from __future__ import annotations

import pytest

from sessions_app.dashboard.fragments import session_fragments
from sessions_app.models import AgentSession, SessionEvent
from tests.dashboard.conftest import chat, session_new

pytestmark = pytest.mark.django_db(transaction=True)


def delegated() -> tuple[AgentSession, AgentSession]:
    """A root whose scripted model spawned a child that reported "42"."""
    root = session_new(title="Root work")
    chat(root.pk, "spawn echo 42")
    return AgentSession.objects.get(pk=root.pk), AgentSession.objects.get(parent_session=root)


def html_of(client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200
    return response.content.decode()


def test_list_shows_roots_with_a_collapsed_tree_of_their_sub_sessions(operator_client):
    root, child = delegated()
    html = html_of(operator_client, "/")
    assert f'id="session-row-{root.pk}"' in html
    assert f'id="session-row-{child.pk}"' not in html
    # Collapsed: the tree is fetched when the operator opens it.
    assert '<details class="subtree"' in html and f'hx-get="/sessions/{root.pk}/subtree/"' in html
    assert "1 sub-session</summary>" in html
    tree = html_of(operator_client, f"/sessions/{root.pk}/subtree/")
    assert f'href="/sessions/{child.pk}/"' in tree and "echo 42" in tree and "depth 1" in tree


def test_searching_finds_a_sub_session_itself(operator_client):
    root, child = delegated()
    html = html_of(operator_client, f"/?q={child.pk}")
    assert f'id="session-row-{child.pk}"' in html and "sub-session, depth 1" in html


def test_parent_page_lists_its_children_with_status_and_reported_result(operator_client):
    root, child = delegated()
    html = html_of(operator_client, f"/sessions/{root.pk}/")
    family = html.split('id="session-family"', 1)[1].split("</details>\n</div>", 1)[0]
    assert f'href="/sessions/{child.pk}/" data-child-link>echo 42</a>' in family
    assert 'class="outcome outcome-reported">reported<' in family
    assert "<summary>42</summary>" in family


def test_parent_transcript_links_the_spawn_call_and_its_result_to_the_child(operator_client):
    root, child = delegated()
    html = html_of(operator_client, f"/sessions/{root.pk}/")
    transcript = html.split('id="transcript-items"', 1)[1].split('id="streaming"', 1)[0]
    # Once on the call, once on its result.
    assert transcript.count(f'class="child-link small" href="/sessions/{child.pk}/"') == 2


def test_child_page_links_back_to_its_parent(operator_client):
    root, child = delegated()
    html = html_of(operator_client, f"/sessions/{child.pk}/")
    assert f'href="/sessions/{root.pk}/" data-parent-link>Root work</a>' in html
    assert "Sub-session (spawn) of" in html and "depth 1" in html


def test_live_spawned_event_adds_a_marker_and_refreshes_the_children(operator_client):
    root, child = delegated()
    spawned = SessionEvent.objects.get(session=root, type="session.spawned").as_frame()
    html = session_fragments(session_id=root.pk, events=[spawned], operator="op")
    assert "Sub-session started (spawn): echo 42" in html
    assert f'href="/sessions/{child.pk}/"' in html
    assert 'id="session-family" class="session-family" hx-swap-oob="true"' in html


def test_events_that_do_not_concern_children_leave_the_family_block_alone(operator_client):
    root, _ = delegated()
    usage = SessionEvent.objects.filter(session=root, type="usage").first()
    assert usage is not None
    html = session_fragments(session_id=root.pk, events=[usage.as_frame()], operator="op")
    assert 'id="session-family"' not in html


def test_subtree_of_an_unknown_session_is_404(operator_client):
    assert operator_client.get("/sessions/00000000-0000-0000-0000-000000000000/subtree/").status_code == 404


def test_subtree_needs_an_operator(client):
    root = session_new()
    response = client.get(f"/sessions/{root.pk}/subtree/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_admin_shows_a_childs_place_in_its_tree(admin_client):
    root, child = delegated()
    html = html_of(admin_client, f"/admin/sessions_app/agentsession/{child.pk}/change/")
    assert f"/admin/sessions_app/agentsession/{root.pk}/change/" in html
    assert child.spawned_by_tool_use_id in html
