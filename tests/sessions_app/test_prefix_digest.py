"""A request's SHA-256 taken up where its stable prefix ends (`prefix.request_mark`): the same
digest as hashing it whole, for a fraction of the bytes."""

from __future__ import annotations

import hashlib
import random
import uuid

import pytest

from sessions_app.engine import prefix


@pytest.fixture(autouse=True)
def _small_checkpoints(monkeypatch):
    monkeypatch.setattr(prefix, "DIGEST_CHECKPOINT_BYTES", 64)
    prefix._last_request.clear()
    yield
    prefix._last_request.clear()


def _digest(session_id: uuid.UUID, encoded: bytes) -> tuple[str, prefix.RequestMark]:
    mark = prefix.request_mark(session_id, encoded)
    digest, checkpoints = mark.digest()
    prefix.digest_remember(mark, checkpoints)
    return digest, mark


def test_a_growing_request_hashes_only_past_its_stable_prefix():
    session_id = uuid.uuid4()
    history = b'{"messages":[' + b",".join(b'{"n":%d}' % n for n in range(100))
    first = history + b"]}"
    digest, mark = _digest(session_id, first)
    assert digest == hashlib.sha256(first).hexdigest()
    assert mark.to_hash == len(first)  # nothing to take up from
    second = history + b',{"n":100}]}'
    digest, mark = _digest(session_id, second)
    assert digest == hashlib.sha256(second).hexdigest()
    assert mark.stable_prefix == len(history)
    assert mark.to_hash < 64 + len(second) - len(history)  # from the last checkpoint inside the prefix


def test_any_change_anywhere_gives_the_digest_of_the_bytes():
    """Changes early, late, inside and at checkpoints, shorter and longer requests, an empty
    one: always the SHA-256 of the request's bytes."""
    rng = random.Random(12)
    session_id = uuid.uuid4()
    request = bytes(rng.randrange(256) for _ in range(1000))
    for _ in range(60):
        where = rng.randrange(len(request) + 1)
        kind = rng.randrange(4)
        if kind == 0:  # change a byte
            if request:
                where = min(where, len(request) - 1)
                request = request[:where] + bytes([(request[where] + 1) % 256]) + request[where + 1 :]
        elif kind == 1:  # cut
            request = request[:where]
        elif kind == 2:  # grow
            request = request + bytes(rng.randrange(256) for _ in range(rng.randrange(300)))
        else:  # the same again
            pass
        digest, _ = _digest(session_id, request)
        assert digest == hashlib.sha256(request).hexdigest()


def test_checkpoints_of_an_older_request_are_not_taken_for_a_newer_one():
    """Two calls measured before either's hash is remembered (the first's checkpoints come
    late): the late ones are dropped, the next request still gets the right digest."""
    session_id = uuid.uuid4()
    a = b"a" * 500
    b = b"b" * 500
    mark_a = prefix.request_mark(session_id, a)
    mark_b = prefix.request_mark(session_id, b)
    digest_a, checkpoints_a = mark_a.digest()
    prefix.digest_remember(mark_a, checkpoints_a)  # too late: b is the session's latest
    digest_b, checkpoints_b = mark_b.digest()
    prefix.digest_remember(mark_b, checkpoints_b)
    assert (digest_a, digest_b) == (hashlib.sha256(a).hexdigest(), hashlib.sha256(b).hexdigest())
    c = b"b" * 400 + b"c" * 100
    digest_c, mark_c = _digest(session_id, c)
    assert digest_c == hashlib.sha256(c).hexdigest()
    assert mark_c.start == 384  # b's checkpoint, not a's


def test_an_evicted_session_hashes_its_request_whole(monkeypatch):
    session_id = uuid.uuid4()
    _digest(session_id, b"x" * 1000)
    prefix._last_request.clear()
    digest, mark = _digest(session_id, b"x" * 1100)
    assert digest == hashlib.sha256(b"x" * 1100).hexdigest()
    assert (mark.stable_prefix, mark.to_hash) == (0, 1100)


@pytest.mark.django_db(transaction=True)
async def test_a_sessions_recorded_calls_verify_when_hashed_from_the_previous(connect, monkeypatch):
    """Through the turn loop: each call's hash is taken up from its previous request's, and
    every recorded call still rebuilds to the bytes its SHA-256 names."""
    from asgiref.sync import sync_to_async

    from sessions_app import selectors
    from sessions_app.engine import runner
    from sessions_app.models import ModelCall

    marks: list[prefix.RequestMark] = []
    real = runner.request_mark

    def spied(session_id, encoded):
        mark = real(session_id, encoded)
        marks.append(mark)
        return mark

    monkeypatch.setattr(runner, "request_mark", spied)
    client = await connect()
    await client.create(system_prompt="You help.")
    for n in range(6):
        await client.send({"type": "user.message", "content": f"remember: fact number {n} " + "x" * 200})
        await client.until("turn.completed")
    await runner.turns_wait_idle(timeout=10)
    calls = await sync_to_async(lambda: list(ModelCall.objects.order_by("started_at")))()
    assert len(calls) == len(marks) >= 6
    for call in calls:
        assert await sync_to_async(selectors.model_call_request_verified)(call=call)
    assert all(mark.to_hash < len(mark.encoded) for mark in marks[1:])  # taken up, not whole
