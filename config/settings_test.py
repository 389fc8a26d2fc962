"""Settings of the test suite: the local development defaults, chosen explicitly (PALIMPSEST_DEV).

Set before `config.settings` reads the environment; server processes the tests start get it
through the environment they inherit (and `tests/servers.py` sets it for them too).
"""

from __future__ import annotations

import os

os.environ.setdefault("PALIMPSEST_DEV", "1")

from config.settings import *  # noqa: E402, F403
