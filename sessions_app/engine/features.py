"""The one ordered list of features the engine reads, and what it reads off them.

The list is the engine's own core feature, then `settings.PALIMPSEST_FEATURES` (dotted paths,
loaded on first use like Django's MIDDLEWARE, and again when a test overrides the setting). Its
order is the order of the sections in the system prompt and of the tools in each request (and so
what prompt caching sees), and the order in which scripted rules are tried. The contract a
feature implements is `engine.contract`; nothing registers itself by being imported.

`docs/architecture.md` walks through adding a feature.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from django.conf import settings as django_settings
from django.core.signals import setting_changed
from django.utils.module_loading import import_string

from sessions_app.engine.contract import Feature, SessionSnapshot
from sessions_app.engine.core import CORE_FEATURE
from sessions_app.engine.feature_set import FeatureSet

__all__ = ["FeatureSet", "features", "session_snapshot"]


@cache
def features() -> FeatureSet:
    """The engine's core feature, then `settings.PALIMPSEST_FEATURES`, loaded once per process
    (and again when a test overrides the setting)."""
    loaded = [CORE_FEATURE]
    for path in django_settings.PALIMPSEST_FEATURES:
        feature = import_string(path)
        if not isinstance(feature, Feature):
            raise TypeError(f"{path} is not a Feature")
        loaded.append(feature)
    return FeatureSet(loaded)


def _reload(*, setting: str, **kwargs: Any) -> None:
    if setting == "PALIMPSEST_FEATURES":
        features.cache_clear()


setting_changed.connect(_reload)


def session_snapshot(session: Any, *, with_notepad: bool = False) -> SessionSnapshot:
    """The snapshot of a session row (`SessionSnapshot.from_session`) with this process's
    features' default settings."""
    return features().snapshot(session, with_notepad=with_notepad)
