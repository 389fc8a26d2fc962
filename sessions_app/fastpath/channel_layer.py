"""The channel layer of a single process (no REDIS_URL): Channels' in-memory layer, cleaning at
most once a second.

Channels' `InMemoryChannelLayer` cleans on every `receive` and `group_send`: it walks every
channel's queue and every group membership to drop expired messages and memberships. With N
attached connections that is O(N) work per event, twice (the group send, then the consumer's
receive), so N sessions each streaming events cost O(N²): at 500 connections it was the largest
single item of a turn's CPU (bench/README.md, issue 12). Cleaning at most every
`clean_interval` seconds keeps what cleaning is for (a message nobody read for `expiry` seconds
is dropped, and its channel leaves its groups), at most `clean_interval` later.

Channels' cleaning also leaves a group behind, empty, once its last member was dropped that way
(only `group_discard` deletes empty groups): one empty entry per session whose last follower
stopped reading, for the life of the process. Cleaning here deletes them too.

Its group send made a task per member and awaited them with `as_completed`, though the
in-memory `send` never waits (a full queue raises at once): a tenth of the CPU a one-step turn
spends outside its database work and model call. Here the members are sent to one after
another, a full one skipped as before.
"""

from __future__ import annotations

import contextlib
from typing import Any

from channels.exceptions import ChannelFull
from channels.layers import InMemoryChannelLayer

from sessions_app.fastpath.compat import InMemoryLayerCleaning


class ThrottledInMemoryChannelLayer(InMemoryLayerCleaning, InMemoryChannelLayer):
    """Channels' in-memory layer, cleaning at most every `clean_interval` seconds
    (`compat.InMemoryLayerCleaning`), sending a group's message to its members one by one."""

    def __init__(self, *args: Any, clean_interval: float = 1.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.clean_interval = clean_interval

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        assert isinstance(message, dict), "Message is not a dict"
        self.require_valid_group_name(group)
        self.expired_clean()
        for channel in self.group_members(group):
            # As Channels: a member that reads nothing does not hold up the others.
            with contextlib.suppress(ChannelFull):
                await self.send(channel, message)
