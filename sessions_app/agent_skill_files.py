"""Skills as files (agentskills.io): a folder per skill holding `SKILL.md`, whose YAML front
matter gives `name` and `description` and whose markdown body follows. The one implementation
of reading and writing them: `manage.py import_skills` / `export_skills` (folders) and the
dashboard's import and export (a zip of `NAME/SKILL.md`). Pure: it parses and renders, the
services write.

A file is parsed with a real YAML parser (PyYAML's safe loader); every rule a skill keeps is
checked here too (`sessions_app.agent_knowledge_rules`), so a bad file is reported by its path
before anything is written.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

import yaml

from sessions_app.agent_knowledge_rules import (
    SKILL_CONTENT_MAX_CHARS,
    SKILL_DESCRIPTION_MAX_CHARS,
    AgentKnowledgeError,
    skill_fields_check,
)
from sessions_app.services import SkillFields

SKILL_FILE = "SKILL.md"
FENCE = "---"
# A skill file is at most its longest body and description in UTF-8 (4 bytes a character at
# most) plus room for the rest of its front matter: a bigger one cannot hold a valid skill.
SKILL_FILE_MAX_BYTES = 4 * (SKILL_CONTENT_MAX_CHARS + SKILL_DESCRIPTION_MAX_CHARS) + 4_096
# A zip of skills (the dashboard's upload): its own size, its entries (files and folders, the
# skills' other files included), and what its files unpack to in all (a zip bomb's ratio is
# refused before anything is unpacked).
SKILL_ZIP_MAX_BYTES = 5 * 1024 * 1024
SKILL_ZIP_MAX_ENTRIES = 2_000
SKILL_ZIP_MAX_UNPACKED_BYTES = 50 * 1024 * 1024


class SkillFileError(ValueError):
    """A `SKILL.md` that cannot be imported; the message starts with its path."""


def skill_file_parse(text: str, *, folder: str, path: str) -> SkillFields:
    """The skill a `SKILL.md` holds: front matter between `---` lines (a YAML mapping with the
    strings `name` and `description`; other keys are allowed and not kept), then the body (one
    blank line after the front matter is not part of it). The name must be the folder's, as
    agentskills.io requires. `SkillFileError` names the path and what is wrong."""
    lines = text.split("\n")
    if not lines or lines[0].rstrip() != FENCE:
        raise SkillFileError(f"{path}: it must begin with YAML front matter (a line '---').")
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].rstrip() == FENCE)
    except StopIteration:
        raise SkillFileError(f"{path}: its front matter has no closing '---' line.") from None
    try:
        meta = yaml.safe_load("\n".join(lines[1:end]))
    except yaml.YAMLError as exc:
        raise SkillFileError(f"{path}: its front matter is not valid YAML ({exc}).") from None
    if not isinstance(meta, dict):
        raise SkillFileError(f"{path}: its front matter must be a mapping with name and description.")
    name, description = meta.get("name"), meta.get("description")
    if not isinstance(name, str) or not isinstance(description, str):
        raise SkillFileError(f"{path}: its front matter needs the strings 'name' and 'description'.")
    body = "\n".join(lines[end + 1 :])
    if body.startswith("\n"):
        body = body[1:]
    try:
        name, description, body = skill_fields_check(name=name, description=description, content=body)
    except AgentKnowledgeError as exc:
        raise SkillFileError(f"{path}: {exc}") from None
    if name != folder:
        raise SkillFileError(f'{path}: the skill "{name}" must be in a folder of that name, not "{folder}".')
    return SkillFields(name=name, description=description, content=body)


def skill_file_render(skill: SkillFields) -> str:
    """The `SKILL.md` text of `skill`; `skill_file_parse` reads it back unchanged."""
    meta = yaml.safe_dump(
        {"name": skill.name, "description": skill.description},
        sort_keys=False,
        allow_unicode=True,
        width=10_000,
    )
    return f"{FENCE}\n{meta}{FENCE}\n\n{skill.content}"


def skill_folder_read(directory: Path) -> list[SkillFields]:
    """Every skill of `directory` (each `DIR/*/SKILL.md`, by folder name). Raises `SkillFileError`
    listing every bad file by path (each on its line), so that none is imported."""
    if not directory.is_dir():
        raise SkillFileError(f"{directory}: not a directory.")
    skills: list[SkillFields] = []
    problems: list[str] = []
    for path in sorted(directory.glob(f"*/{SKILL_FILE}")):
        try:
            if path.stat().st_size > SKILL_FILE_MAX_BYTES:
                raise SkillFileError(f"{path}: over {SKILL_FILE_MAX_BYTES:,} bytes (SKILL_FILE_MAX_BYTES).")
            try:
                text = path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                raise SkillFileError(f"{path}: not UTF-8 text.") from None
            skills.append(skill_file_parse(text, folder=path.parent.name, path=str(path)))
        except SkillFileError as exc:
            problems.append(str(exc))
    if problems:
        raise SkillFileError("\n".join(problems))
    if not skills:
        raise SkillFileError(f"{directory}: no {SKILL_FILE} in any of its folders (DIR/NAME/{SKILL_FILE}).")
    return skills


def skill_folder_write(directory: Path, skills: Sequence[SkillFields]) -> list[Path]:
    """Write each skill to `directory/NAME/SKILL.md` (made when missing; a file there is
    replaced). Returns the paths written."""
    written = []
    for skill in skills:
        folder = directory / skill.name
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / SKILL_FILE
        path.write_text(skill_file_render(skill), encoding="utf-8")
        written.append(path)
    return written


def _zip_path_unsafe(name: str) -> bool:
    """An entry that would land outside the folder it is unpacked into (zip-slip): absolute, a
    drive, a backslash or a `..` part."""
    if name.startswith("/") or "\\" in name or (len(name) > 1 and name[1] == ":"):
        return True
    return ".." in PurePosixPath(name).parts


def skill_zip_read(data: bytes) -> list[SkillFields]:
    """Every skill of a zip of `NAME/SKILL.md` folders (other files in a skill's folder are not
    kept; a `SKILL.md` at another depth is not a skill). Raises `SkillFileError` for a file that
    is no zip, is over `SKILL_ZIP_MAX_BYTES`, has more than `SKILL_ZIP_MAX_ENTRIES` entries or
    unpacks to more than `SKILL_ZIP_MAX_UNPACKED_BYTES`, or, listing each by its path (each on its
    line), for an entry outside the zip's folder (zip-slip), a `SKILL.md` over
    `SKILL_FILE_MAX_BYTES`, not UTF-8, or not a valid skill (malformed YAML included): so that
    none is imported. Nothing is unpacked to disk."""
    if len(data) > SKILL_ZIP_MAX_BYTES:
        raise SkillFileError(
            f"The zip is {len(data):,} bytes; at most {SKILL_ZIP_MAX_BYTES:,} (SKILL_ZIP_MAX_BYTES)."
        )
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError):
        raise SkillFileError("The file is not a zip archive.") from None
    with archive:
        entries = archive.infolist()
        if len(entries) > SKILL_ZIP_MAX_ENTRIES:
            raise SkillFileError(
                f"The zip has {len(entries):,} entries; at most {SKILL_ZIP_MAX_ENTRIES:,} "
                "(SKILL_ZIP_MAX_ENTRIES)."
            )
        unpacked = sum(info.file_size for info in entries)
        if unpacked > SKILL_ZIP_MAX_UNPACKED_BYTES:
            raise SkillFileError(
                f"The zip unpacks to {unpacked:,} bytes; at most {SKILL_ZIP_MAX_UNPACKED_BYTES:,} "
                "(SKILL_ZIP_MAX_UNPACKED_BYTES)."
            )
        problems = [
            f"{info.filename}: a path outside the zip's folder."
            for info in entries
            if _zip_path_unsafe(info.filename)
        ]
        if problems:
            raise SkillFileError("\n".join(problems))
        skills: list[SkillFields] = []
        for info in sorted(entries, key=lambda i: i.filename):
            parts = PurePosixPath(info.filename).parts
            if info.is_dir() or len(parts) != 2 or parts[1] != SKILL_FILE:
                continue
            try:
                skills.append(_zip_skill(archive, info, folder=parts[0]))
            except SkillFileError as exc:
                problems.append(str(exc))
    if problems:
        raise SkillFileError("\n".join(problems))
    if not skills:
        raise SkillFileError(f"The zip has no {SKILL_FILE} in a folder of its own (NAME/{SKILL_FILE}).")
    return skills


def _zip_skill(archive: zipfile.ZipFile, info: zipfile.ZipInfo, *, folder: str) -> SkillFields:
    path = info.filename
    if info.file_size > SKILL_FILE_MAX_BYTES:
        raise SkillFileError(f"{path}: over {SKILL_FILE_MAX_BYTES:,} bytes (SKILL_FILE_MAX_BYTES).")
    try:
        with archive.open(info) as handle:
            # Read one byte past the limit: a header that lies about the size is caught too.
            raw = handle.read(SKILL_FILE_MAX_BYTES + 1)
    except (zipfile.BadZipFile, RuntimeError, NotImplementedError, OSError) as exc:
        raise SkillFileError(f"{path}: cannot be unpacked ({exc}).") from None
    if len(raw) > SKILL_FILE_MAX_BYTES:
        raise SkillFileError(f"{path}: over {SKILL_FILE_MAX_BYTES:,} bytes (SKILL_FILE_MAX_BYTES).")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SkillFileError(f"{path}: not UTF-8 text.") from None
    return skill_file_parse(text, folder=folder, path=path)


def skill_zip_write(skills: Sequence[SkillFields]) -> bytes:
    """A zip of `NAME/SKILL.md` for each skill, which `skill_zip_read` reads back unchanged."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for skill in skills:
            archive.writestr(f"{skill.name}/{SKILL_FILE}", skill_file_render(skill))
    return buffer.getvalue()
