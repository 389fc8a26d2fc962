"""The documentation a clone carries: the public contract is the team's copy, and every relative
link in the README, bench/README.md and docs/ leads to a file of the repository."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

BASE_DIR = Path(__file__).resolve().parent.parent
PROTOCOL = BASE_DIR / "docs" / "PROTOCOL.md"
# The team's shared copy sits beside the repository where it is developed; a clone has none.
SHARED_PROTOCOL = BASE_DIR.parent / "shared" / "PROTOCOL.md"

DOCUMENTS = [
    BASE_DIR / "README.md",
    BASE_DIR / "bench" / "README.md",
    *sorted((BASE_DIR / "docs").glob("*.md")),
]

FENCED_BLOCK = re.compile(r"^(`{3,}|~{3,}).*?^\1[ \t]*$", re.S | re.M)
INLINE_CODE = re.compile(r"`+[^`\n]*`+")
# [text](target) and ![alt](target), target up to a space (a title may follow) or the bracket.
INLINE_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+[\"'(][^)]*)?\)")
# [label]: target
REFERENCE_LINK = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s.*)?$", re.M)
EXTERNAL = re.compile(r"^(?:[a-zA-Z][a-zA-Z0-9+.-]*:|//|#)")


def relative_links(document: Path) -> list[str]:
    """The relative link targets of a markdown document, outside code, without their fragment."""
    text = INLINE_CODE.sub("", FENCED_BLOCK.sub("", document.read_text(encoding="utf-8")))
    targets = INLINE_LINK.findall(text) + REFERENCE_LINK.findall(text)
    return [unquote(t.split("#", 1)[0]) for t in targets if not EXTERNAL.match(t)]


def test_protocol_is_in_the_repository() -> None:
    assert PROTOCOL.is_file()


@pytest.mark.skipif(not SHARED_PROTOCOL.is_file(), reason="no shared copy beside the repository")
def test_protocol_equals_the_shared_copy() -> None:
    assert PROTOCOL.read_bytes() == SHARED_PROTOCOL.read_bytes(), (
        "docs/PROTOCOL.md differs from ../shared/PROTOCOL.md: copy it again"
    )


def test_design_is_in_the_repository() -> None:
    assert (BASE_DIR / "docs" / "DESIGN.md").is_file()


def test_the_link_finder_sees_links_and_skips_code(tmp_path: Path) -> None:
    document = tmp_path / "doc.md"
    document.write_text(
        '[a](a.md) ![b](img/b.png "title") [c](https://example.org) [d](#here) [e](e.md#part)\n'
        "`[f](f.md)`\n```\n[g](g.md)\n```\n[h]: h.md\n",
        encoding="utf-8",
    )
    assert relative_links(document) == ["a.md", "img/b.png", "e.md", "h.md"]


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(BASE_DIR)))
def test_relative_links_point_at_files(document: Path) -> None:
    missing = [
        target
        for target in relative_links(document)
        if target and not (document.parent / target).resolve().exists()
    ]
    assert missing == [], f"{document.relative_to(BASE_DIR)} links to files that do not exist: {missing}"


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(BASE_DIR)))
def test_relative_links_stay_in_the_repository(document: Path) -> None:
    outside = [
        target
        for target in relative_links(document)
        if not (document.parent / target).resolve().is_relative_to(BASE_DIR)
    ]
    assert outside == [], f"{document.relative_to(BASE_DIR)} links outside the repository: {outside}"
