"""The memory app in the Django admin; each feature registers its models in its own module."""

from __future__ import annotations

import memory_app.scratchpad_admin  # noqa: F401
