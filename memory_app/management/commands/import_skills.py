"""`manage.py import_skills DIR --agent NAME [--client CLIENT]`: each `DIR/*/SKILL.md` becomes a
skill of the agent (a new version of a skill it has), all or nothing."""

from __future__ import annotations

import getpass
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory_app.knowledge.settings import SETTINGS
from memory_app.management.commands._agent_lookup import agent_named
from sessions_app import services
from sessions_app.agent_knowledge_rules import AgentKnowledgeError
from sessions_app.agent_skill_files import SkillFileError, skill_folder_read
from sessions_app.authors import operator_author


class Command(BaseCommand):
    help = "Import skills from SKILL.md files (DIR/NAME/SKILL.md) into an agent, all or nothing."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("directory", type=Path)
        parser.add_argument("--agent", required=True, help="the agent's name")
        parser.add_argument("--client", help="its client (token name); needed when two have that agent")

    def handle(self, *args: Any, **options: Any) -> None:
        agent = agent_named(options["agent"], options["client"])
        try:
            skills = skill_folder_read(options["directory"])
        except SkillFileError as exc:
            raise CommandError(f"Nothing was imported.\n{exc}") from None
        knowledge = agent.settings.get("knowledge") if isinstance(agent.settings, dict) else None
        max_skills = (knowledge or {}).get("max_skills", SETTINGS["knowledge"]["max_skills"])
        try:
            services.agent_skills_import(
                agent_id=agent.pk,
                skills=skills,
                author=operator_author(getpass.getuser()),
                max_skills=int(max_skills),
            )
        except AgentKnowledgeError as exc:
            raise CommandError(f"Nothing was imported. {exc}") from None
        names = ", ".join(skill.name for skill in skills)
        self.stdout.write(f"Imported {len(skills)} skill(s) into {agent.name}: {names}.")
