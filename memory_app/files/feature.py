"""`fs_read` as the engine sees it: one `Feature`."""

from __future__ import annotations

from memory_app.files.tools import FS_READ_TOOL
from sessions_app.engine.contract import Feature

FEATURE = Feature(name="files", tools=[FS_READ_TOOL])
