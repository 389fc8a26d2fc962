"""`manage.py export_skills NAME DIR [--client CLIENT]`: each skill of the agent as
`DIR/NAME/SKILL.md` (agentskills.io), which `import_skills` reads back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from memory_app.management.commands._agent_lookup import agent_named
from sessions_app.agent_knowledge_selectors import agent_skills_list
from sessions_app.agent_skill_files import skill_folder_write
from sessions_app.services import SkillFields


class Command(BaseCommand):
    help = "Export an agent's skills as SKILL.md files (DIR/NAME/SKILL.md)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("agent", help="the agent's name")
        parser.add_argument("directory", type=Path)
        parser.add_argument("--client", help="its client (token name); needed when two have that agent")

    def handle(self, *args: Any, **options: Any) -> None:
        agent = agent_named(options["agent"], options["client"])
        skills = [SkillFields(s.name, s.description, s.content) for s in agent_skills_list(agent_id=agent.pk)]
        written = skill_folder_write(options["directory"], skills)
        self.stdout.write(f"Exported {len(written)} skill(s) of {agent.name} to {options['directory']}.")
