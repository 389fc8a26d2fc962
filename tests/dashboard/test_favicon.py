"""Every page names the site's icon, so no browser asks for a /favicon.ico that is not there."""

from __future__ import annotations

import pytest
from django.contrib.staticfiles import finders
from django.templatetags.static import static

from tests.dashboard.conftest import session_new

ICON = static("dashboard/favicon.svg")


def test_the_icon_is_a_static_file():
    assert finders.find("dashboard/favicon.svg")


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/", "/sessions/{id}/", "/admin/", "/admin/sessions_app/agentsession/"])
def test_operator_pages_link_the_icon(admin_client, path):
    session = session_new()
    html = admin_client.get(path.format(id=session.pk)).content.decode()
    assert f'<link rel="icon" href="{ICON}" type="image/svg+xml">' in html


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/accounts/login/", "/admin/login/"])
def test_login_pages_link_the_icon(client, path):
    assert f'<link rel="icon" href="{ICON}"' in client.get(path).content.decode()


def test_favicon_ico_leads_to_the_icon(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 302 and response["Location"] == ICON
