"""An operator's changes of an agent's skills (DESIGN.md, "Agents"): a new skill, an edit, a
delete and a restore of a version, each naming the version the operator saw (a change made
meanwhile is never overwritten); an import of a zip of `NAME/SKILL.md` folders (all or nothing)
and the export of every skill as one.

Writes go through the knowledge services as the operator (`operator:<username>`), within the
agent's `knowledge.max_skills`; the zip is read by `agent_skill_files` (never unpacked to disk).
A skill is written by a model: it is shown escaped or as sanitized markdown, never marked safe.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST, require_safe
from django_htmx.http import HttpResponseClientRedirect, reswap, retarget

from sessions_app import services
from sessions_app.agent_knowledge_rules import AgentKnowledgeError, AgentSkillConflict
from sessions_app.agent_knowledge_selectors import agent_skills_list
from sessions_app.agent_skill_files import SkillFileError, skill_zip_read, skill_zip_write
from sessions_app.authors import operator_author
from sessions_app.dashboard import selectors
from sessions_app.dashboard.agent_knowledge_forms import BaseVersionForm, SkillForm, SkillImportForm
from sessions_app.dashboard.auth import operator_required
from sessions_app.dashboard.views.agents import agent_or_404
from sessions_app.dashboard.views.common import HtmxHttpRequest, operator_name
from sessions_app.engine.agent_limits import max_skills
from sessions_app.models import Agent, AgentPart, AgentSkill, AgentVersion

EDITOR = "dashboard/agent_edit.html#skill-editor"


def _go(request: HtmxHttpRequest, url: str) -> HttpResponse:
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


def _skill_url(agent: Agent, name: str, version: int | None = None) -> str:
    url = reverse("dashboard:agent_skill", args=[agent.pk, name])
    return f"{url}?{urlencode({'version': version})}" if version is not None else url


def _editor(request: HtmxHttpRequest, context: dict[str, Any], status: int) -> HttpResponse:
    """A refused save: the editor comes back into its slot, the page around it stays."""
    response = render(request, EDITOR, context, status=status)
    return reswap(retarget(response, "#skill-editor"), "innerHTML")


def _refused(request: HtmxHttpRequest, agent: Agent, name: str, message: str, status: int) -> HttpResponse:
    context = {"agent": agent, "skill_name": name, "message": message}
    response = render(request, "dashboard/agent_edit.html#skill-refused", context, status=status)
    return reswap(retarget(response, "#restore-editor"), "innerHTML")


def _skill_save(request: HtmxHttpRequest, agent: Agent, form: SkillForm, *, editing: str) -> HttpResponse:
    context: dict[str, Any] = {"agent": agent, "form": form, "editing": editing}
    if not form.is_valid():
        return _editor(request, context, 422)
    data = form.cleaned_data
    try:
        row = services.agent_skill_write(
            agent_id=agent.pk,
            name=data["name"],
            description=data["description"],
            content=data["content"],
            author=operator_author(operator_name(request)),
            max_skills=max_skills(agent),
            expected_version=data["base_version"],
        )
    except AgentSkillConflict as changed:
        now = AgentSkill.objects.filter(agent=agent, name=data["name"]).first()
        retry = SkillForm(initial={**data, "base_version": changed.version or 0})
        if editing:
            retry.fields["name"].disabled = True
        context.update(
            form=retry,
            conflict=True,
            conflict_version=changed.version or 0,
            conflict_description=now.description if now is not None else "",
            conflict_text=now.content if now is not None else "(deleted)",
        )
        return _editor(request, context, 409)
    except AgentKnowledgeError as exc:
        form.add_error(None, str(exc))
        return _editor(request, context, 422)
    return _go(request, _skill_url(agent, row.name, row.version))


@require_http_methods(["GET", "POST"])
@operator_required
def agent_skill_new(request: HtmxHttpRequest, agent_id: int) -> HttpResponse:
    """GET: an empty skill editor. POST: the skill written as a new skill (`expected_version` 0:
    one of that name written meanwhile is not overwritten), then its page."""
    agent = agent_or_404(agent_id)
    if request.method == "GET":
        form = SkillForm(initial={"base_version": 0})
        return render(request, EDITOR, {"agent": agent, "form": form, "editing": ""})
    return _skill_save(request, agent, SkillForm(request.POST), editing="")


@require_http_methods(["GET", "POST"])
@operator_required
def agent_skill_edit(request: HtmxHttpRequest, agent_id: int, name: str) -> HttpResponse:
    """GET: the skill's editor at its current version. POST: its description and body saved as a
    new version, if it is still at the version the editor opened at (409 with both otherwise)."""
    agent = agent_or_404(agent_id)
    skill = AgentSkill.objects.filter(agent=agent, name=name).first()
    if request.method == "GET":
        if skill is None:
            raise Http404("No such skill.")
        initial = {
            "name": name,
            "description": skill.description,
            "content": skill.content,
            "base_version": skill.version,
        }
        form = SkillForm(initial=initial)
    else:
        # The name is the page's: a rename is a new skill and a delete.
        form = SkillForm(request.POST, initial={"name": name})
    form.fields["name"].disabled = True
    if request.method == "GET":
        return render(request, EDITOR, {"agent": agent, "form": form, "editing": name})
    return _skill_save(request, agent, form, editing=name)


@require_POST
@operator_required
def agent_skill_delete(request: HtmxHttpRequest, agent_id: int, name: str) -> HttpResponse:
    """The skill deleted (its versions stay), if it is still at the version the page showed."""
    agent = agent_or_404(agent_id)
    form = BaseVersionForm(request.POST)
    if not form.is_valid():
        return _refused(request, agent, name, "The page sent no current version: reload it.", 422)
    try:
        services.agent_skill_delete(
            agent_id=agent.pk,
            name=name,
            author=operator_author(operator_name(request)),
            expected_version=form.cleaned_data["base_version"],
        )
    except AgentSkillConflict as changed:
        message = (
            f"Not deleted: the skill changed since this page was loaded (it is now version "
            f"{changed.version}). Nothing was changed; look at the new version, then decide again."
        )
        return _refused(request, agent, name, message, 409)
    except AgentKnowledgeError as exc:
        return _refused(request, agent, name, f"Not deleted: {exc}", 409)
    return _go(request, reverse("dashboard:agent", args=[agent.pk]))


@require_POST
@operator_required
def agent_skill_restore(request: HtmxHttpRequest, agent_id: int, name: str, version: int) -> HttpResponse:
    """Version `version` of the skill written again (its description and body) as a new version,
    if the skill is still at the version the page showed (`base_version`, 0: deleted)."""
    agent = agent_or_404(agent_id)
    old = AgentVersion.objects.filter(agent=agent, part=AgentPart.SKILL, name=name, version=version).first()
    if old is None:
        raise Http404("No such version.")
    form = BaseVersionForm(request.POST)
    if not form.is_valid():
        return _refused(request, agent, name, "The page sent no current version: reload it.", 422)
    if old.deleted:
        return _refused(
            request, agent, name, f"Version {version} is a deletion: there is nothing to restore.", 422
        )
    try:
        row = services.agent_skill_write(
            agent_id=agent.pk,
            name=name,
            description=(old.extra or {}).get("description", ""),
            content=old.content,
            author=operator_author(operator_name(request)),
            max_skills=max_skills(agent),
            expected_version=form.cleaned_data["base_version"],
        )
    except AgentSkillConflict as changed:
        message = (
            f"Not restored: the skill changed since this page was loaded (it is now version "
            f"{changed.version}). Nothing was overwritten; look at the new version, then restore again."
        )
        return _refused(request, agent, name, message, 409)
    except AgentKnowledgeError as exc:
        return _refused(request, agent, name, f"Not restored: {exc}", 422)
    return _go(request, _skill_url(agent, name, row.version))


# ---------------------------------------------------------------------------
# Import and export
# ---------------------------------------------------------------------------
def skills_context(agent: Agent, **extra: Any) -> dict[str, Any]:
    return {
        "agent": agent,
        "skills": selectors.agent_skills(agent=agent),
        "import_form": SkillImportForm(),
        **extra,
    }


@require_POST
@operator_required
def agent_skills_import(request: HtmxHttpRequest, agent_id: int) -> HttpResponse:
    """A zip of `NAME/SKILL.md` folders: each a skill of the agent (a new version of one it has),
    all or nothing. A bad zip or file (its path named), or a rule broken: 422, nothing written."""
    agent = agent_or_404(agent_id)
    form = SkillImportForm(request.POST, request.FILES)
    errors: list[str] = []
    if not form.is_valid():
        errors = [str(e) for field in form.errors.values() for e in field]
    else:
        try:
            skills = skill_zip_read(form.cleaned_data["archive"].read())
            services.agent_skills_import(
                agent_id=agent.pk,
                skills=skills,
                author=operator_author(operator_name(request)),
                max_skills=max_skills(agent),
            )
        except (SkillFileError, AgentKnowledgeError) as exc:
            errors = str(exc).splitlines()
    if errors:
        context = skills_context(agent, import_errors=["Nothing was imported.", *errors])
        return render(request, "dashboard/agent.html#skills", context, status=422)
    if not request.htmx:
        return redirect(reverse("dashboard:agent", args=[agent.pk]))
    notice = f"Imported {len(skills)} skill(s): {', '.join(s.name for s in skills)}."
    return render(request, "dashboard/agent.html#skills", skills_context(agent, notice=notice))


@require_safe
@operator_required
def agent_skills_export(request: HtmxHttpRequest, agent_id: int) -> HttpResponse:
    """Every skill of the agent as a zip of `NAME/SKILL.md`, which the import reads back."""
    agent = agent_or_404(agent_id)
    skills = [
        services.SkillFields(s.name, s.description, s.content) for s in agent_skills_list(agent_id=agent.pk)
    ]
    response = HttpResponse(skill_zip_write(skills), content_type="application/zip")
    # An agent's name is lowercase letters, digits, "-" and "_": safe in the header as it is.
    response["Content-Disposition"] = f'attachment; filename="{agent.name}-skills.zip"'
    return response
