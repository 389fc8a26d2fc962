"""`fs_read` (memory_app/files/), the seed's executor: off without PALIMPSEST_FS_ROOT, jailed to it."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.fake_anthropic import FakeAnthropicServer, text, tool_use
from tests.memory_app.observation_helpers import tool_names, tool_result, turn, use_fs_root

pytestmark = pytest.mark.django_db(transaction=True)


async def _fs_read(connect: Any, fake_anthropic: FakeAnthropicServer, tool_input: dict) -> dict:
    """The tool_result the model got for fs_read(tool_input)."""
    fake_anthropic.enqueue(tool_use("fs_read", tool_input), text("done"))
    client = await connect()
    await client.create()
    await turn(client)
    return tool_result(fake_anthropic.requests[1].body)


@pytest.fixture
def root(settings: Any, tmp_path: Path) -> Path:
    root = use_fs_root(settings, tmp_path)
    (root / "notes.txt").write_text("inside\n")
    (tmp_path / "secret.txt").write_text("outside\n")
    return root


async def test_off_without_a_shared_folder(
    connect: Any, fake_anthropic: FakeAnthropicServer, settings: Any
) -> None:
    settings.PALIMPSEST_FS_ROOT = ""
    block = await _fs_read(connect, fake_anthropic, {"path": "notes.txt"})
    assert "fs_read" not in tool_names(fake_anthropic.requests[0].body)
    assert block["is_error"] is True
    assert block["content"].startswith("Unknown tool 'fs_read'")


async def test_reads_a_text_file_inside_the_folder(
    connect: Any, fake_anthropic: FakeAnthropicServer, root: Path
) -> None:
    block = await _fs_read(connect, fake_anthropic, {"path": "notes.txt"})
    assert json.loads(block["content"]) == {
        "path": "notes.txt",
        "bytes": 7,
        "encoding": "utf-8",
        "content": "inside\n",
    }


async def test_reads_a_file_in_a_subfolder(
    connect: Any, fake_anthropic: FakeAnthropicServer, root: Path
) -> None:
    (root / "logs").mkdir()
    (root / "logs" / "app.log").write_text("line\n")
    block = await _fs_read(connect, fake_anthropic, {"path": "logs/app.log"})
    assert json.loads(block["content"])["path"] == "logs/app.log"


async def test_reads_an_absolute_path_inside_the_folder(
    connect: Any, fake_anthropic: FakeAnthropicServer, root: Path
) -> None:
    block = await _fs_read(connect, fake_anthropic, {"path": str(root / "notes.txt")})
    assert json.loads(block["content"])["content"] == "inside\n"


async def test_reads_binary_as_base64(connect: Any, fake_anthropic: FakeAnthropicServer, root: Path) -> None:
    (root / "blob").write_bytes(b"\x00\xff\x10")
    block = await _fs_read(connect, fake_anthropic, {"path": "blob", "encoding": "binary"})
    result = json.loads(block["content"])
    assert (result["encoding"], base64.b64decode(result["content"])) == ("binary", b"\x00\xff\x10")


async def test_decodes_with_the_given_encoding(
    connect: Any, fake_anthropic: FakeAnthropicServer, root: Path
) -> None:
    (root / "latin").write_bytes("café".encode("latin-1"))
    block = await _fs_read(connect, fake_anthropic, {"path": "latin", "encoding": "latin-1"})
    assert json.loads(block["content"])["content"] == "café"


@pytest.mark.parametrize(
    ("tool_input", "message"),
    [
        ({"path": "../secret.txt"}, "path must not contain '..'"),
        ({"path": "sub/../../secret.txt"}, "path must not contain '..'"),
        ({"path": "notes.txt/.."}, "path must not contain '..'"),
        ({"path": "/etc/passwd"}, "'/etc/passwd' is outside the shared folder"),
        ({"path": ""}, "path must be a non-empty string."),
        ({"path": 7}, 'fs_read: "path" must be a string, not an integer.'),
        ({"path": "missing.txt"}, "No file 'missing.txt' in the shared folder."),
        ({"path": "."}, "'.' is not a file."),
        (
            {"path": "notes.txt", "encoding": "rot13"},
            'fs_read: "encoding" must be one of utf-8, latin-1, ascii, utf-16, binary, not "rot13".',
        ),
    ],
)
async def test_bad_paths_are_tool_errors(
    connect: Any, fake_anthropic: FakeAnthropicServer, root: Path, tool_input: dict, message: str
) -> None:
    block = await _fs_read(connect, fake_anthropic, tool_input)
    assert block["is_error"] is True
    assert message in block["content"]


async def test_refuses_an_absolute_path_outside_the_folder(
    connect: Any, fake_anthropic: FakeAnthropicServer, root: Path, tmp_path: Path
) -> None:
    block = await _fs_read(connect, fake_anthropic, {"path": str(tmp_path / "secret.txt")})
    assert block["is_error"] is True
    assert "is outside the shared folder" in block["content"]
    assert "outside\n" not in block["content"]


async def test_refuses_a_symlink_that_points_outside(
    connect: Any, fake_anthropic: FakeAnthropicServer, root: Path, tmp_path: Path
) -> None:
    os.symlink(tmp_path / "secret.txt", root / "link.txt")
    block = await _fs_read(connect, fake_anthropic, {"path": "link.txt"})
    assert block["is_error"] is True
    assert "'link.txt' is outside the shared folder" in block["content"]


async def test_refuses_a_file_under_a_symlinked_folder_that_points_outside(
    connect: Any, fake_anthropic: FakeAnthropicServer, root: Path, tmp_path: Path
) -> None:
    os.symlink(tmp_path, root / "escape")
    block = await _fs_read(connect, fake_anthropic, {"path": "escape/secret.txt"})
    assert block["is_error"] is True
    assert "is outside the shared folder" in block["content"]


async def test_follows_a_symlink_that_stays_inside(
    connect: Any, fake_anthropic: FakeAnthropicServer, root: Path
) -> None:
    os.symlink(root / "notes.txt", root / "alias.txt")
    block = await _fs_read(connect, fake_anthropic, {"path": "alias.txt"})
    assert json.loads(block["content"])["content"] == "inside\n"


async def test_invalid_text_is_a_tool_error(
    connect: Any, fake_anthropic: FakeAnthropicServer, root: Path
) -> None:
    (root / "bad").write_bytes(b"ok \xff\xfe")
    block = await _fs_read(connect, fake_anthropic, {"path": "bad"})
    assert block["is_error"] is True
    assert "not valid utf-8 (byte 3)" in block["content"]


async def test_text_with_nul_characters_must_be_read_as_binary(
    connect: Any, fake_anthropic: FakeAnthropicServer, root: Path
) -> None:
    (root / "nul").write_bytes(b"a\x00b")
    block = await _fs_read(connect, fake_anthropic, {"path": "nul"})
    assert block["is_error"] is True
    assert "read it with encoding binary" in block["content"]
