"""/healthz: what a load balancer or a supervisor probes."""

from __future__ import annotations

import pytest


@pytest.mark.django_db
@pytest.mark.parametrize("method", ["get", "head"])
def test_healthz_answers_get_and_head(client, method):
    response = getattr(client, method)("/healthz")
    assert response.status_code == 200


@pytest.mark.django_db
def test_healthz_refuses_a_post(client):
    assert client.post("/healthz").status_code == 405
