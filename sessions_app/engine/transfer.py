"""A session's export and import (docs/export.md): one JSON document, `"format":
"palimpsest.session/1"`, with the session, its sub-sessions nested in it, every feature's part
(`FeatureLifecycle.export` / `ids` / `import_`), the copies of the agents it names and the request
parts its model calls name. The HTTP API, the commands and the dashboard all come here.

Export streams: `export_chunks` yields the document's text piece by piece, each piece read with
keyset-paged queries (`transfer_selectors`), so that no cursor outlives a piece and no session is
held whole in memory; `export_stream` drives it from async code, a few pieces per hop to a
database thread.

Import: `session_import` checks the format and version, gives every id the document's rows
are known by a new one (sessions, turns, archives, and what the features' `ids` say), writes the
new ids wherever the document named the old ones, and writes everything in one transaction: a
problem anywhere is a `DocumentError` naming it, and nothing is written.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from django.db import DataError, IntegrityError, transaction
from django.utils import timezone

from sessions_app import services, transfer_selectors
from sessions_app.common.content import NUL
from sessions_app.common.db import db
from sessions_app.engine.features import features
from sessions_app.engine.transfer_agents import agent_for
from sessions_app.models import AgentSession, AgentToken
from sessions_app.services import session_import as import_services
from sessions_app.transfer_rows import DocumentError, list_at
from sessions_app.validation import SpecError, session_create_clean

FORMAT_NAME = "palimpsest.session"
FORMAT_VERSION = 1
FORMAT = f"{FORMAT_NAME}/{FORMAT_VERSION}"
# How much text `export_stream` gathers per hop to a database thread.
STREAM_PIECE_BYTES = 256 * 1024
_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# ---------------------------------------------------------------------------
# Export
# ---------------------------------------------------------------------------


def export_chunks(session_id: uuid.UUID) -> Iterator[str]:
    """The session's document, piece by piece (sync; each piece runs its own queries, in
    whichever thread asks for it). `AgentSession.DoesNotExist` before the first piece when there
    is no such session."""
    AgentSession.objects.filter(pk=session_id).values_list("pk", flat=True).get()
    return _document(session_id)


def _document(session_id: uuid.UUID) -> Iterator[str]:
    visited: list[uuid.UUID] = []
    yield f'{{"format":{_dumps(FORMAT)},"exported_at":{_dumps(timezone.now().isoformat())},"session":'
    yield from _session_chunks(session_id, visited)
    agents: dict[str, Any] = {}
    parts: dict[str, str] = {}
    for visited_id in visited:
        copy = transfer_selectors.agent_export(session_id=visited_id)
        if copy is not None:
            agents.setdefault(copy["name"], copy)
        parts.update(transfer_selectors.request_parts(session_id=visited_id))
    yield f',"agents":{_dumps(list(agents.values()))},"request_parts":{_dumps(parts)}}}\n'


def _session_chunks(session_id: uuid.UUID, visited: list[uuid.UUID]) -> Iterator[str]:
    visited.append(session_id)
    bound = transfer_selectors.session_bound(session_id=session_id)
    yield '{"session":' + _dumps(transfer_selectors.session_export_row(session_id=session_id))
    for table in transfer_selectors.TABLES:
        yield f',"{table.name}":['
        after, first = None, True
        while True:
            items, after = transfer_selectors.table_page(
                table=table, session_id=session_id, after=after, bound=bound
            )
            if items:
                yield ("" if first else ",") + ",".join(_dumps(item) for item in items)
                first = False
            if after is None:
                break
        yield "]"
    yield ',"features":{'
    first = True
    for name, lifecycle in features().lifecycles:
        if lifecycle.export is None:
            continue
        value = lifecycle.export(session_id)
        if isinstance(value, Iterator):
            # A list written item by item, each read as it is written.
            yield ("" if first else ",") + f"{_dumps(name)}:["
            for i, item in enumerate(value):
                yield ("," if i else "") + _dumps(item)
            yield "]"
        else:
            yield ("" if first else ",") + f"{_dumps(name)}:{_dumps(value)}"
        first = False
    yield '},"children":['
    for i, child in enumerate(transfer_selectors.children_ids(session_id=session_id)):
        if i:
            yield ","
        yield from _session_chunks(child, visited)
    yield "]}"


async def export_stream(session_id: uuid.UUID) -> AsyncIterator[bytes]:
    """`export_chunks` for async code (a `StreamingHttpResponse`): pieces of about
    STREAM_PIECE_BYTES, each read in a database thread. Check that the session exists first."""
    pieces = await db(export_chunks)(session_id)

    def gather() -> bytes | None:
        gathered: list[str] = []
        size = 0
        for piece in pieces:
            gathered.append(piece)
            size += len(piece)
            if size >= STREAM_PIECE_BYTES:
                break
        return "".join(gathered).encode() if gathered else None

    while (data := await db(gather)()) is not None:
        yield data


# ---------------------------------------------------------------------------
# Import
# ---------------------------------------------------------------------------


def document_read(path: Path) -> Any:
    """The JSON value of the file at `path` (`DocumentError` when it is not JSON)."""
    try:
        with path.open("rb") as file:
            return json.load(file, parse_constant=_no_constant)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DocumentError("", f"the document is not JSON ({exc})") from None
    except RecursionError:
        raise DocumentError("", "the document is nested too deeply") from None


def _no_constant(name: str) -> Any:
    raise DocumentError("", f"the document is not JSON ({name} is not a JSON number)")


def format_check(document: Any) -> None:
    """The format and its version, checked first: a foreign document is refused by them."""
    if not isinstance(document, dict):
        raise DocumentError("", "the document must be a JSON object")
    name = document.get("format")
    if "format" not in document:
        raise DocumentError("format", f"is missing: not a Palimpsest session document ({FORMAT})")
    if not isinstance(name, str) or not name.startswith(FORMAT_NAME + "/"):
        raise DocumentError("format", f"{name!r} is not a Palimpsest session document ({FORMAT})")
    if name != FORMAT:
        raise DocumentError(
            "format", f"version {name.split('/', 1)[1]!r} is not supported (this server reads {FORMAT})"
        )


def session_import_file(path: Path, *, owner: AgentToken) -> AgentSession:
    """`session_import` of the document in the file at `path` (runs in a DB thread)."""
    return session_import(document_read(path), owner=owner)


def session_import(document: Any, *, owner: AgentToken) -> AgentSession:
    """A new session (with its sub-sessions) from an export document, owned by `owner`: all or
    nothing (runs in a DB thread). `DocumentError` naming what is wrong;
    `services.SessionQuotaExceeded` when the client has made its sessions of the minute."""
    format_check(document)
    tree = _dict_at(document, "session", "")
    agents = list_at(document, "agents", "")
    parts = document.get("request_parts")
    if "request_parts" not in document:
        raise DocumentError("request_parts", "is missing")
    try:
        with transaction.atomic():
            # As a session.create: the client's sessions-per-minute quota (`SessionQuotaExceeded`).
            services.session_quota_check(owner_id=owner.pk)
            ids, sessions = _ids_new(tree, "session")
            tree = _replaced(tree, _replacer(ids), "session")
            agent_ids: dict[str, int] = {}
            root = _tree_import(
                tree, "session", owner=owner, agents=agents, agent_ids=agent_ids, sessions=frozenset(sessions)
            )
            import_services.request_parts_import(parts=parts)
    except IntegrityError as exc:
        raise DocumentError("session", f"its rows conflict with each other ({exc})") from None
    except DataError as exc:
        raise DocumentError("session", f"a value the database refuses ({exc})") from None
    return root


def _dict_at(data: Any, key: str, where: str) -> dict[str, Any]:
    at = f"{where}.{key}" if where else key
    if not isinstance(data, dict) or key not in data:
        raise DocumentError(at, "is missing")
    if not isinstance(data[key], dict):
        raise DocumentError(at, "must be an object")
    return data[key]


def _id_at(data: Any, where: str) -> str:
    value = data.get("id") if isinstance(data, dict) else None
    try:
        return str(uuid.UUID(value)) if isinstance(value, str) else _missing()
    except ValueError:
        raise DocumentError(f"{where}.id", "must be a UUID") from None


def _missing() -> str:
    raise ValueError


def _ids_new(tree: dict[str, Any], where: str) -> tuple[dict[str, str], list[uuid.UUID]]:
    """Old id → new id, for every id the document's rows are known by (this session's tree), and
    the tree's new session ids."""
    row = _dict_at(tree, "session", where)
    session_id = uuid.uuid4()
    ids = {_id_at(row, f"{where}.session"): str(session_id)}
    sessions = [session_id]
    for key in ("turns", "archives"):
        for i, item in enumerate(list_at(tree, key, where)):
            ids[_id_at(item, f"{where}.{key}[{i}]")] = str(uuid.uuid4())
    feature_data = _dict_at(tree, "features", where)
    for name, lifecycle in features().lifecycles:
        if lifecycle.ids is not None and feature_data.get(name) is not None:
            try:
                ids.update(lifecycle.ids(session_id, feature_data[name]))
            except ValueError as exc:
                raise DocumentError(f"{where}.features.{name}", str(exc)) from None
    for i, child in enumerate(list_at(tree, "children", where)):
        if not isinstance(child, dict):
            raise DocumentError(f"{where}.children[{i}]", "must be an object")
        child_ids, child_sessions = _ids_new(child, f"{where}.children[{i}]")
        ids.update(child_ids)
        sessions.extend(child_sessions)
    return ids, sessions


def _replacer(ids: Mapping[str, str]) -> Callable[[str], str]:
    """A function writing each new id where a text names an old one: UUIDs, and the features'
    other ids (whole runs of letters and digits of their lengths)."""
    lengths = sorted({len(old) for old in ids if not re.fullmatch(_UUID, old)})
    alternatives = [_UUID] + [rf"(?<![0-9A-Za-z])[0-9A-Za-z]{{{n}}}(?![0-9A-Za-z])" for n in lengths]
    pattern = re.compile("|".join(alternatives))

    def replace(text: str) -> str:
        return pattern.sub(lambda match: ids.get(match.group(), match.group()), text)

    return replace


def _replaced(value: Any, replace: Callable[[str], str], where: str) -> Any:
    """`value` with every text through `replace`, changed in place (a document of tens of
    megabytes is not copied); U+0000 anywhere is refused (no database stores it in text or
    JSON: the service never writes one)."""
    if isinstance(value, str):
        if NUL in value:
            raise DocumentError(where, "must not hold U+0000")
        return replace(value)
    if isinstance(value, list):
        for i, item in enumerate(value):
            value[i] = _replaced(item, replace, f"{where}[{i}]")
    elif isinstance(value, dict):
        renamed = False
        for key, item in value.items():
            if NUL in key:
                raise DocumentError(where, "a key must not hold U+0000")
            value[key] = _replaced(item, replace, f"{where}.{key}")
            renamed = renamed or replace(key) != key
        if renamed:  # keys that name ids (rare): the same order, new names
            items = list(value.items())
            value.clear()
            value.update((replace(key), item) for key, item in items)
    return value


def _tree_import(
    tree: dict[str, Any],
    where: str,
    *,
    owner: AgentToken,
    agents: list[Any],
    agent_ids: dict[str, int],
    sessions: frozenset[uuid.UUID],
    root: tuple[uuid.UUID, int] | None = None,
) -> AgentSession:
    row = tree["session"]
    agent_id = agent_for(
        row.get("agent"), f"{where}.session.agent", owner=owner, agents=agents, cache=agent_ids
    )
    _fields_check(row, f"{where}.session")
    depth = row.get("depth")
    session = import_services.session_row_import(
        data=row, owner=owner, agent_id=agent_id, where=f"{where}.session", root=root
    )
    # The top session is the imported tree's root, at the depth it had (checked by now).
    below = root if root is not None else (session.pk, depth)
    import_services.session_tables_import(session_id=session.pk, data=tree, where=where, tree=sessions)
    # Exported while a turn ran: the copy's turn ends (its history stays valid for the API).
    services.imported_turns_close(session_id=session.pk)
    feature_data = tree["features"]
    for name, lifecycle in features().lifecycles:
        data = feature_data.get(name)
        if lifecycle.import_ is None or data is None:
            continue
        try:
            lifecycle.import_(session.pk, data)
        except ValueError as exc:
            raise DocumentError(f"{where}.features.{name}", str(exc)) from None
    for i, child in enumerate(tree["children"]):
        _tree_import(
            child,
            f"{where}.children[{i}]",
            owner=owner,
            agents=agents,
            agent_ids=agent_ids,
            sessions=sessions,
            root=below,
        )
    return session


def _fields_check(row: dict[str, Any], where: str) -> None:
    """The session's fields, settings and client tools checked by `session.create`'s rules (the
    settings against this server's features, their defaults filled in where the document has
    none), in place."""
    feature_set = features()
    try:
        clean = session_create_clean(
            title=row.get("title"),
            model=row.get("model"),
            system_prompt=row.get("system_prompt"),
            context_window=row.get("context_window"),
            compact_threshold=row.get("compact_threshold"),
            tools=row.get("client_tools"),
            settings=row.get("settings"),
            settings_schema=feature_set.settings_schema,
            reserved_tool_names=feature_set.tool_names(),
        )
    except SpecError as exc:
        raise DocumentError(where, exc.message) from None
    row["settings"], row["client_tools"] = clean["settings"], clean["tools"]
