"""The performance machinery: where a turn's hot path leaves the frameworks' general road, and the
one module holding every framework internal that doing so relies on.

- `compat`: every use of Django's, Channels', daphne's, Twisted's and asgiref's internals (the
  raw SQLite cursor, partial model instances, value preparers, health checks, the
  `sync_to_async` thread-local, the consumers' dispatch, the in-memory layer's cleaning, the
  transport behind an ASGI `send`), with the versions it was written for; imports only the
  standard library, Django and asgiref;
- `rows`: the statements every turn runs, their SQL built once per shape instead of compiled by
  the ORM per call (inserts, reads by key or by conditions, updates by key);
- `counters`: the session row's counters (`last_seq`, `next_position`) added to and read back in
  one statement (`UPDATE ... RETURNING`);
- `channel_layer`: the single-process channel layer (Channels' in-memory one, cleaning at most
  once a second);
- `channel_announcer`: committed events to the channel layer's groups, one message per write,
  handed from a database thread to its event loop without waiting.

`rows` and `counters` belong to the data layer (the services, the selectors and the engine use
them; they import nothing of the engine or of Channels); `channel_layer` and
`channel_announcer` to the websocket side (they import Channels; settings name them). This
`__init__` imports nothing, so that using `rows` loads nothing of the rest.
"""
