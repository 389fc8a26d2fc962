"""A zip of `NAME/SKILL.md` folders (the dashboard's import and export), read with every bad
entry reported by its path and nothing unpacked to disk."""

from __future__ import annotations

import io
import zipfile

import pytest

from sessions_app import agent_skill_files
from sessions_app.agent_skill_files import SkillFileError, skill_zip_read, skill_zip_write
from sessions_app.services import SkillFields

GOOD = "---\nname: weekly-report\ndescription: Write the weekly report.\n---\n\n# Weekly report\n"


def zip_of(entries: dict[str, str | bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def test_each_folders_skill_md_is_a_skill_and_other_files_are_not_kept() -> None:
    data = zip_of(
        {
            "weekly-report/SKILL.md": GOOD,
            "weekly-report/scripts/run.py": "print(1)",
            "triage/SKILL.md": "---\nname: triage\ndescription: d\n---\nBody\n",
            "README.md": "ignored",
            "deeper/triage/SKILL.md": "not read: not a folder of the zip's root",
        }
    )
    assert skill_zip_read(data) == [
        SkillFields("triage", "d", "Body\n"),
        SkillFields("weekly-report", "Write the weekly report.", "# Weekly report\n"),
    ]


def test_export_then_import_is_the_same_skills() -> None:
    skills = [SkillFields("a-b", 'Quotes " and: colons', "---\nbody\n"), SkillFields("c", "漢字", "")]
    assert skill_zip_read(skill_zip_write(skills)) == skills


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        (
            "bad/SKILL.md",
            "---\nname: bad\ndescription: [unclosed\n---\n",
            "bad/SKILL.md: its front matter is not valid YAML",
        ),
        ("bad/SKILL.md", b"---\nname: bad\ndescription: \xff\n---\n", "bad/SKILL.md: not UTF-8 text."),
        (
            "bad/SKILL.md",
            "---\nname: other\ndescription: d\n---\n",
            'bad/SKILL.md: the skill "other" must be in a folder',
        ),
        ("../evil/SKILL.md", GOOD, "../evil/SKILL.md: a path outside the zip's folder."),
        ("/etc/SKILL.md", GOOD, "/etc/SKILL.md: a path outside the zip's folder."),
        ("a/../../x.txt", "x", "a/../../x.txt: a path outside the zip's folder."),
        ("a\\..\\x.txt", "x", "a\\..\\x.txt: a path outside the zip's folder."),
    ],
)
def test_a_bad_entry_is_named_by_its_path_and_nothing_is_returned(
    name: str, data: str | bytes, message: str
) -> None:
    with pytest.raises(SkillFileError) as caught:
        skill_zip_read(zip_of({"weekly-report/SKILL.md": GOOD, name: data}))
    assert message in str(caught.value)


def test_every_bad_file_is_listed() -> None:
    with pytest.raises(SkillFileError) as caught:
        skill_zip_read(zip_of({"a/SKILL.md": "nothing", "b/SKILL.md": "nothing"}))
    assert str(caught.value).splitlines()[0].startswith("a/SKILL.md: ")
    assert str(caught.value).splitlines()[1].startswith("b/SKILL.md: ")


def test_not_a_zip_no_skill_or_too_big_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SkillFileError, match="not a zip archive"):
        skill_zip_read(b"PK not really")
    with pytest.raises(SkillFileError, match="no SKILL.md in a folder of its own"):
        skill_zip_read(zip_of({"README.md": "x", "SKILL.md": GOOD}))
    monkeypatch.setattr(agent_skill_files, "SKILL_ZIP_MAX_BYTES", 100)
    with pytest.raises(SkillFileError, match="at most 100 "):
        skill_zip_read(zip_of({"weekly-report/SKILL.md": GOOD}))


def test_too_many_entries_or_too_much_unpacked_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(agent_skill_files, "SKILL_ZIP_MAX_ENTRIES", 2)
    with pytest.raises(SkillFileError, match="3 entries; at most 2"):
        skill_zip_read(zip_of({"a/SKILL.md": GOOD, "b/x": "1", "c/y": "2"}))
    monkeypatch.setattr(agent_skill_files, "SKILL_ZIP_MAX_ENTRIES", 2_000)
    # A small zip that unpacks big (a bomb's shape) is refused from its headers.
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("pad/data.bin", b"\0" * (agent_skill_files.SKILL_ZIP_MAX_UNPACKED_BYTES + 1))
    assert len(buffer.getvalue()) < agent_skill_files.SKILL_ZIP_MAX_BYTES
    with pytest.raises(SkillFileError, match="unpacks to"):
        skill_zip_read(buffer.getvalue())


def test_a_skill_md_over_the_file_limit_is_named() -> None:
    big = "---\nname: big\ndescription: d\n---\n" + "c" * (agent_skill_files.SKILL_FILE_MAX_BYTES + 1)
    with pytest.raises(SkillFileError, match="big/SKILL.md: over "):
        skill_zip_read(zip_of({"big/SKILL.md": big}))
