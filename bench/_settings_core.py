"""The server's settings with only the engine's core feature (`bench_instructions.py`: what the
memory features and the extra tools add to a turn)."""

from config.settings import *  # noqa: F403

PALIMPSEST_FEATURES = []
