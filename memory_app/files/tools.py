"""`fs_read`, seed 004's executor, as a server tool jailed to PALIMPSEST_FS_ROOT.

Off unless `settings.PALIMPSEST_FS_ROOT` names a folder. A path is relative to that folder (an
absolute one must lie inside it). The jail: a `..` component is refused outright; the path is
then resolved (`Path.resolve`, which follows every symlink) and must still lie inside the
resolved root, so neither an absolute path elsewhere nor a symlink pointing out escapes; the
file is opened with O_NOFOLLOW so its last component cannot be swapped for a symlink in between.

Result: `{"path", "bytes", "encoding", "content"}`, where `path` is relative to the root and
`content` is the decoded text or, with `encoding: "binary"`, the bytes in base64 (which makes a
large result a binary observation).
"""

from __future__ import annotations

import asyncio
import base64
import os
from pathlib import Path, PurePath
from typing import Any

from django.conf import settings

from memory_app.files.prompts import BINARY_ENCODING, FS_READ_DESCRIPTION, FS_READ_SCHEMA
from sessions_app.engine.contract import SessionSnapshot, TextLimit, ToolContext, ToolError, ToolSpec

FS_READ = "fs_read"
# Linux's PATH_MAX: no longer path names a file.
FS_PATH_MAX_CHARS = 4096
FS_READ_MAX_BYTES = 64 * 1024 * 1024  # a larger file is refused (it is read whole into memory)


def fs_root() -> Path | None:
    root = settings.PALIMPSEST_FS_ROOT
    return Path(root).resolve() if root else None


def fs_read_enabled(session: SessionSnapshot) -> bool:
    return bool(settings.PALIMPSEST_FS_ROOT)


def fs_path_resolve(*, root: Path, requested: str) -> Path:
    """The real path of `requested` inside `root`; `ToolError` if it would leave the root."""
    if not requested.strip():
        raise ToolError("path must be a non-empty string.")
    if "\x00" in requested:
        raise ToolError("path must not contain NUL characters.")
    if ".." in PurePath(requested).parts:
        raise ToolError("path must not contain '..': give a path inside the shared folder.")
    candidate = Path(requested) if os.path.isabs(requested) else root / requested
    try:
        resolved = candidate.resolve(strict=True)
    except FileNotFoundError:
        raise ToolError(f"No file {requested!r} in the shared folder.") from None
    except (OSError, RuntimeError) as exc:  # a symlink loop, a permission error
        raise ToolError(f"Cannot open {requested!r}: {exc.__class__.__name__}.") from None
    if not resolved.is_relative_to(root):
        raise ToolError(f"{requested!r} is outside the shared folder; only files inside it can be read.")
    if not resolved.is_file():
        raise ToolError(f"{requested!r} is not a file.")
    return resolved


def _read(tool_input: dict[str, Any]) -> dict[str, Any]:
    root = fs_root()
    if root is None:
        raise ToolError("fs_read is off: the server has no shared folder (PALIMPSEST_FS_ROOT).")
    # The schema's enum is the encodings; "path" is required, a string.
    encoding = tool_input.get("encoding") or "utf-8"
    path = fs_path_resolve(root=root, requested=tool_input["path"])
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        raise ToolError(f"Cannot open {tool_input['path']!r}: {exc.strerror}.") from None
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(FS_READ_MAX_BYTES + 1)
    if len(data) > FS_READ_MAX_BYTES:
        raise ToolError(f"The file is larger than {FS_READ_MAX_BYTES} bytes, the most fs_read reads.")
    relative = path.relative_to(root).as_posix()
    if encoding == BINARY_ENCODING:
        content = base64.b64encode(data).decode("ascii")
    else:
        try:
            content = data.decode(encoding)
        except UnicodeDecodeError as exc:
            raise ToolError(
                f"The file is not valid {encoding} (byte {exc.start}): "
                "read it with encoding binary or latin-1."
            ) from None
        if "\x00" in content:
            # PostgreSQL text cannot hold NUL: such a file is binary for our purposes.
            raise ToolError("The file contains NUL characters: read it with encoding binary.")
    return {"path": relative, "bytes": len(data), "encoding": encoding, "content": content}


async def fs_read(ctx: ToolContext, tool_input: dict[str, Any]) -> dict[str, Any]:
    # Reading blocks, and needs no database: a worker thread of its own.
    return await asyncio.to_thread(_read, tool_input)


FS_READ_TOOL = ToolSpec(
    name=FS_READ,
    description=FS_READ_DESCRIPTION,
    input_schema=FS_READ_SCHEMA,
    handler=fs_read,
    enabled=fs_read_enabled,
    text_limits={"path": TextLimit(chars=FS_PATH_MAX_CHARS, name="FS_PATH_MAX_CHARS, the longest path")},
)
