"""How the scripted model streams its answer: whole words gathered into pieces of about
`STREAM_CHUNK_CHARS`, so a long answer streams briskly yet still piece by piece."""

from __future__ import annotations

import asyncio

from sessions_app.engine.providers.scripted import STREAM_CHUNK_CHARS, ScriptedProvider, text_stream_chunks

LONG = " ".join(f"word{i % 10}" for i in range(300))  # about 1,800 characters


def test_pieces_join_back_to_the_text():
    text = "  Leading spaces,\nnew lines\n\nand   runs of spaces.  "
    assert "".join(text_stream_chunks(text, size=8)) == text


def test_pieces_are_whole_words_of_about_the_chunk_size():
    pieces = text_stream_chunks(LONG)
    assert all(piece.endswith(" ") for piece in pieces[:-1])  # never a word cut in two
    assert all(
        STREAM_CHUNK_CHARS <= len(piece) <= STREAM_CHUNK_CHARS + len("word0 ") for piece in pieces[:-1]
    )


def test_a_long_answer_streams_in_tens_of_pieces_not_hundreds():
    assert 1700 < len(LONG) < 1900
    assert 10 <= len(text_stream_chunks(LONG)) <= 1800 // STREAM_CHUNK_CHARS + 1


def test_a_short_answer_is_one_piece():
    assert text_stream_chunks("Hello there.") == ["Hello there."]


def test_the_provider_streams_the_answer_in_those_pieces():
    received: list[str] = []

    async def on_text(piece: str) -> None:
        received.append(piece)

    body = {
        "model": "scripted",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": f"echo: {LONG}"}],
    }
    response = asyncio.run(ScriptedProvider().complete(body, on_text=on_text))
    answer = "".join(block["text"] for block in response.content if block["type"] == "text")
    assert "".join(received) == answer
    assert received == text_stream_chunks(answer)
    assert len(received) > 1
