"""Skills as SKILL.md files: `manage.py import_skills` and `export_skills` with real files,
malformed ones reported by path with nothing imported."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from sessions_app import services
from sessions_app.agent_models import Agent, AgentSkill, AgentVersion
from sessions_app.agent_skill_files import SkillFileError, skill_file_parse, skill_file_render
from sessions_app.services import SkillFields

pytestmark = pytest.mark.django_db

GOOD = "---\nname: weekly-report\ndescription: Write the weekly report.\n---\n\n# Weekly report\n1. Gather.\n"


def skill_dir(root: Path, folder: str, text: str | bytes) -> Path:
    path = root / folder / "SKILL.md"
    path.parent.mkdir(parents=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def skills(agent: Agent) -> list[tuple[str, str, str, int]]:
    return [(s.name, s.description, s.content, s.version) for s in AgentSkill.objects.filter(agent=agent)]


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_import_reads_each_folders_skill_md(tmp_path: Path) -> None:
    agent = Agent.objects.create(owner_name="client", name="helper")
    skill_dir(tmp_path, "weekly-report", GOOD)
    skill_dir(tmp_path, "triage", "---\nname: triage\ndescription: 'Sort: bugs first.'\n---\nBody\n")
    (tmp_path / "not-a-skill").mkdir()
    (tmp_path / "README.md").write_text("ignored")
    out = run("import_skills", str(tmp_path), "--agent", "helper")
    assert "Imported 2 skill(s) into helper: triage, weekly-report." in out
    assert skills(agent) == [
        ("triage", "Sort: bugs first.", "Body\n", 1),
        ("weekly-report", "Write the weekly report.", "# Weekly report\n1. Gather.\n", 1),
    ]
    assert {v.author for v in AgentVersion.objects.filter(agent=agent)} == {
        f"operator:{__import__('getpass').getuser()}"
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("# no front matter\n", "must begin with YAML front matter"),
        ("---\nname: bad-yaml\ndescription: [unclosed\n---\nbody", "not valid YAML"),
        ("---\nname: bad-yaml\n", "no closing '---'"),
        ("---\n- a\n- b\n---\nbody", "must be a mapping"),
        ("---\nname: bad-yaml\n---\nbody", "needs the strings 'name' and 'description'"),
        ("---\nname: 12\ndescription: d\n---\nbody", "needs the strings 'name' and 'description'"),
        ("---\nname: Bad_Yaml\ndescription: d\n---\nbody", "not a valid skill name"),
        ("---\nname: other\ndescription: d\n---\nbody", 'must be in a folder of that name, not "bad-yaml"'),
        (b"---\nname: bad-yaml\ndescription: \xff\n---\n", "not UTF-8"),
    ],
)
def test_a_malformed_file_is_reported_by_path_and_nothing_is_imported(
    tmp_path: Path, text: str | bytes, message: str
) -> None:
    agent = Agent.objects.create(owner_name="client", name="helper")
    skill_dir(tmp_path, "weekly-report", GOOD)
    bad = skill_dir(tmp_path, "bad-yaml", text)
    with pytest.raises(CommandError) as caught:
        run("import_skills", str(tmp_path), "--agent", "helper")
    assert f"{bad}: " in str(caught.value) and message in str(caught.value)
    assert "Nothing was imported" in str(caught.value)
    assert skills(agent) == []


def test_every_malformed_file_is_listed(tmp_path: Path) -> None:
    Agent.objects.create(owner_name="client", name="helper")
    first = skill_dir(tmp_path, "a", "nothing")
    second = skill_dir(tmp_path, "b", "nothing")
    with pytest.raises(CommandError) as caught:
        run("import_skills", str(tmp_path), "--agent", "helper")
    assert str(first) in str(caught.value) and str(second) in str(caught.value)


def test_an_import_past_max_skills_imports_nothing(tmp_path: Path) -> None:
    agent = Agent.objects.create(
        owner_name="client", name="helper", settings={"knowledge": {"max_skills": 1}}
    )
    skill_dir(tmp_path, "weekly-report", GOOD)
    skill_dir(tmp_path, "triage", "---\nname: triage\ndescription: d\n---\nBody\n")
    with pytest.raises(CommandError, match="already has 1 skills"):
        run("import_skills", str(tmp_path), "--agent", "helper")
    assert skills(agent) == []


def test_an_empty_directory_or_a_missing_one_is_an_error(tmp_path: Path) -> None:
    Agent.objects.create(owner_name="client", name="helper")
    with pytest.raises(CommandError, match="no SKILL.md"):
        run("import_skills", str(tmp_path), "--agent", "helper")
    with pytest.raises(CommandError, match="not a directory"):
        run("import_skills", str(tmp_path / "missing"), "--agent", "helper")


def test_client_is_needed_when_two_clients_have_the_agent(tmp_path: Path) -> None:
    Agent.objects.create(owner_name="alice", name="helper")
    bob = Agent.objects.create(owner_name="bob", name="helper")
    skill_dir(tmp_path, "weekly-report", GOOD)
    with pytest.raises(
        CommandError, match=r"Several clients have an agent named 'helper' \('alice', 'bob'\)"
    ):
        run("import_skills", str(tmp_path), "--agent", "helper")
    run("import_skills", str(tmp_path), "--agent", "helper", "--client", "bob")
    assert [s[0] for s in skills(bob)] == ["weekly-report"]


def test_an_unknown_agent_is_an_error(tmp_path: Path) -> None:
    Agent.objects.create(owner_name="alice", name="helper")
    with pytest.raises(CommandError, match="No agent named 'nobody'"):
        run("import_skills", str(tmp_path), "--agent", "nobody")
    with pytest.raises(CommandError, match="No agent named 'helper' of the client 'bob'"):
        run("export_skills", "helper", str(tmp_path), "--client", "bob")


def test_export_writes_skill_md_files_that_import_reads_back(tmp_path: Path) -> None:
    source = Agent.objects.create(owner_name="client", name="helper")
    for name, description, content in [
        ("weekly-report", "Write the weekly report: facts, then 'numbers'.", "\n# Report\n- a\n"),
        ("triage", "Sort — bugs first.\nThen the rest.", ""),
    ]:
        services.agent_skill_write(
            agent_id=source.pk, name=name, description=description, content=content, author="x", max_skills=64
        )
    out = run("export_skills", "helper", str(tmp_path / "out"))
    assert "Exported 2 skill(s) of helper" in out
    assert sorted(p.parent.name for p in (tmp_path / "out").glob("*/SKILL.md")) == ["triage", "weekly-report"]
    target = Agent.objects.create(owner_name="other", name="copy")
    run("import_skills", str(tmp_path / "out"), "--agent", "copy")
    assert [s[:3] for s in skills(target)] == [s[:3] for s in skills(source)]


def test_render_then_parse_is_the_same_skill() -> None:
    skill = SkillFields("a-b", 'Quotes " and: colons, # hashes', "---\nbody with a fence\n")
    assert skill_file_parse(skill_file_render(skill), folder="a-b", path="x") == skill


def test_parse_reports_a_body_over_the_limit() -> None:
    with pytest.raises(SkillFileError, match="x: The body .* at most 100,000"):
        skill_file_parse("---\nname: a\ndescription: d\n---\n" + "c" * 100_001, folder="a", path="x")


def test_a_file_too_big_to_hold_a_skill_is_reported_without_being_read(tmp_path: Path) -> None:
    Agent.objects.create(owner_name="client", name="helper")
    big = skill_dir(tmp_path, "big", "---\nname: big\ndescription: d\n---\n" + "c" * 500_000)
    with pytest.raises(CommandError, match=f"{big}: over 408,192 bytes"):
        run("import_skills", str(tmp_path), "--agent", "helper")


def test_a_long_body_of_multibyte_characters_within_the_limit_imports(tmp_path: Path) -> None:
    agent = Agent.objects.create(owner_name="client", name="helper")
    skill_dir(tmp_path, "wide", "---\nname: wide\ndescription: d\n---\n" + "漢" * 100_000)
    run("import_skills", str(tmp_path), "--agent", "helper")
    assert len(skills(agent)[0][2]) == 100_000
