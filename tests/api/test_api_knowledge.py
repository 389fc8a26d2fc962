"""`/api/v1/agents/{name}/skills...` and `.../state...` (PROTOCOL.md, "HTTP API v1"): skills
with their zip, state with `expected_version`."""

from __future__ import annotations

import io
import zipfile
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core.files.uploadedfile import SimpleUploadedFile

from sessions_app.agent_skill_files import SKILL_ZIP_MAX_BYTES
from sessions_app.models import AgentSkill, AgentStateEntry
from tests.api.conftest import body, error

pytestmark = pytest.mark.django_db(transaction=True)


async def test_skill_put_get_list_delete(api_client: Any) -> None:
    client = await api_client()
    await client.agent("writer")
    put = await client.put(
        "/agents/writer/skills/weekly-report", {"description": "How.", "content": "# Steps"}
    )
    assert (put.status_code, body(put)) == (
        200,
        {"name": "weekly-report", "description": "How.", "content": "# Steps", "version": 1},
    )
    again = body(
        await client.put("/agents/writer/skills/weekly-report", {"description": "How.", "content": "# Two"})
    )
    assert again["version"] == 2
    assert body(await client.get("/agents/writer/skills/weekly-report"))["content"] == "# Two"
    listed = body(await client.get("/agents/writer/skills"))
    assert listed == {"items": [{"name": "weekly-report", "description": "How.", "version": 2}], "next": None}
    assert (await client.delete("/agents/writer/skills/weekly-report")).status_code == 204
    assert error(await client.get("/agents/writer/skills/weekly-report")) == (404, "skill_not_found")
    assert error(await client.delete("/agents/writer/skills/weekly-report")) == (404, "skill_not_found")


async def test_a_bad_skill_is_400_and_nothing_is_written(api_client: Any) -> None:
    client = await api_client()
    await client.agent("writer")
    assert error(
        await client.put("/agents/writer/skills/Bad--name", {"description": "d", "content": "c"})
    ) == (
        400,
        "invalid_value",
    )
    assert error(await client.put("/agents/writer/skills/ok", {"description": "", "content": "c"})) == (
        400,
        "invalid_value",
    )
    assert error(await client.put("/agents/writer/skills/ok", {"description": "d"})) == (400, "invalid_value")
    assert error(await client.get("/agents/writer/skills/Bad--name")) == (400, "invalid_value")
    assert await sync_to_async(AgentSkill.objects.count)() == 0


async def test_the_skills_limit_is_the_agents_own(api_client: Any) -> None:
    client = await api_client()
    await client.agent("writer", settings={"knowledge": {"max_skills": 1}})
    assert (
        await client.put("/agents/writer/skills/one", {"description": "d", "content": "c"})
    ).status_code == 200
    assert error(await client.put("/agents/writer/skills/two", {"description": "d", "content": "c"})) == (
        400,
        "invalid_value",
    )


async def test_the_skills_zip_goes_out_and_comes_back(api_client: Any) -> None:
    source, target = await api_client(), await api_client()
    await source.agent("writer")
    await target.agent("reader")
    await source.put("/agents/writer/skills/alpha", {"description": "A.", "content": "alpha body"})
    await source.put("/agents/writer/skills/beta", {"description": "B.", "content": "beta body"})
    exported = await source.get("/agents/writer/skills.zip")
    assert exported["Content-Type"] == "application/zip"
    names = zipfile.ZipFile(io.BytesIO(exported.content)).namelist()
    assert sorted(names) == ["alpha/SKILL.md", "beta/SKILL.md"]
    upload = SimpleUploadedFile("skills.zip", exported.content, content_type="application/zip")
    response = await target.call("post", "/agents/reader/skills.zip", None, data={"file": upload})
    assert [s["name"] for s in body(response)["imported"]] == ["alpha", "beta"]
    assert body(await target.get("/agents/reader/skills/beta"))["content"] == "beta body"


async def test_a_bad_zip_is_400_and_imports_nothing(api_client: Any) -> None:
    client = await api_client()
    await client.agent("writer")
    upload = SimpleUploadedFile("skills.zip", b"not a zip", content_type="application/zip")
    response = await client.call("post", "/agents/writer/skills.zip", None, data={"file": upload})
    assert error(response) == (400, "invalid_value")
    response = await client.call("post", "/agents/writer/skills.zip", None, data={})
    assert error(response) == (400, "invalid_value")
    assert await sync_to_async(AgentSkill.objects.count)() == 0


async def test_state_put_get_list_delete(api_client: Any) -> None:
    client = await api_client()
    await client.agent("writer")
    put = await client.put("/agents/writer/state/project/status", {"value": {"done": 3}})
    assert (put.status_code, body(put)) == (
        200,
        {"key": "project/status", "value": {"done": 3}, "version": 1},
    )
    # A key is URL-encoded in the path, "/" included.
    assert body(await client.get("/agents/writer/state/project%2Fstatus"))["value"] == {"done": 3}
    await client.put("/agents/writer/state/other", {"value": None})
    await client.put("/agents/writer/state/project/Z", {"value": "z"})
    listed = body(await client.get("/agents/writer/state?prefix=project/"))
    assert [e["key"] for e in listed["items"]] == ["project/Z", "project/status"]
    page = body(await client.get("/agents/writer/state?limit=1"))
    rest = body(await client.get(f"/agents/writer/state?limit=5&cursor={page['next']}"))
    assert [e["key"] for e in page["items"] + rest["items"]] == ["other", "project/Z", "project/status"]
    assert (await client.delete("/agents/writer/state/other")).status_code == 204
    assert error(await client.get("/agents/writer/state/other")) == (404, "key_not_found")
    assert error(await client.delete("/agents/writer/state/other")) == (404, "key_not_found")


async def test_state_put_with_another_expected_version_is_409_and_changes_nothing(api_client: Any) -> None:
    client = await api_client()
    await client.agent("writer")
    await client.put("/agents/writer/state/count", {"value": 1})
    second = body(await client.put("/agents/writer/state/count", {"value": 2, "expected_version": 1}))
    assert second["version"] == 2
    assert error(await client.put("/agents/writer/state/count", {"value": 3, "expected_version": 1})) == (
        409,
        "version_conflict",
    )
    assert error(await client.put("/agents/writer/state/new", {"value": 3, "expected_version": 1})) == (
        409,
        "version_conflict",
    )
    assert body(await client.get("/agents/writer/state/count")) == {"key": "count", "value": 2, "version": 2}
    assert not await sync_to_async(AgentStateEntry.objects.filter(key="new").exists)()


async def test_a_bad_state_write_is_400(api_client: Any) -> None:
    client = await api_client()
    await client.agent("writer")
    assert error(await client.put("/agents/writer/state/" + "k" * 201, {"value": 1})) == (
        400,
        "invalid_value",
    )
    assert error(await client.put("/agents/writer/state/k", {"value": "x" * 70_000})) == (
        400,
        "invalid_value",
    )
    assert error(await client.put("/agents/writer/state/k", {"expected_version": 0})) == (
        400,
        "invalid_value",
    )
    assert error(await client.put("/agents/writer/state/k", {"value": 1, "extra": 2})) == (
        400,
        "invalid_value",
    )
    assert await sync_to_async(AgentStateEntry.objects.count)() == 0


async def test_any_key_is_reachable_url_encoded_line_breaks_included(api_client: Any) -> None:
    client = await api_client()
    await client.agent("writer")
    await client.put("/agents/writer/state/a%0Ab%20c%3F", {"value": 1})
    assert body(await client.get("/agents/writer/state"))["items"][0]["key"] == "a\nb c?"
    assert body(await client.get("/agents/writer/state/a%0Ab%20c%3F"))["value"] == 1


async def test_a_zip_over_its_limit_is_413_json_before_it_is_read(api_client: Any) -> None:
    client = await api_client()
    await client.agent("writer")
    upload = SimpleUploadedFile(
        "skills.zip", b"x" * (SKILL_ZIP_MAX_BYTES + 100_000), content_type="application/zip"
    )
    response = await client.call("post", "/agents/writer/skills.zip", None, data={"file": upload})
    assert error(response) == (413, "too_large")


async def test_an_unknown_api_path_is_a_json_404(api_client: Any) -> None:
    client = await api_client()
    assert error(await client.get("/nothing/here")) == (404, "not_found")
