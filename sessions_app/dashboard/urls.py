"""The dashboard's URLs: its own views, then each feature's (`FeatureDashboard.urls`), in feature
order, included at the root without a namespace of their own: their names join `dashboard:`."""

from __future__ import annotations

from django.urls import include, path

from sessions_app.dashboard.views import (
    agent_knowledge,
    agent_skills,
    agent_tools,
    agents,
    approvals,
    recall,
    records,
    session,
    sessions,
    subsessions,
)
from sessions_app.engine.features import features

app_name = "dashboard"

urlpatterns = [
    path("", sessions.session_list, name="sessions"),
    path("sessions/new/", sessions.session_create, name="session_create"),
    path("sessions/<uuid:session_id>/", session.session_detail, name="session"),
    path("sessions/<uuid:session_id>/status/", session.session_status, name="status"),
    path("sessions/<uuid:session_id>/subtree/", subsessions.subtree, name="subtree"),
    path("sessions/<uuid:session_id>/transcript/", session.transcript_older, name="transcript"),
    path("sessions/<uuid:session_id>/messages/", session.message_send, name="message_send"),
    path("sessions/<uuid:session_id>/cancel/", session.turn_cancel, name="turn_cancel"),
    path("sessions/<uuid:session_id>/compact/", session.compaction_start, name="compact"),
    path("sessions/<uuid:session_id>/delete/", session.session_delete, name="session_delete"),
    path("sessions/<uuid:session_id>/end/", session.session_end, name="session_end"),
    path("sessions/<uuid:session_id>/edit/", session.session_edit, name="session_edit"),
    path("sessions/<uuid:session_id>/context/", session.context_panel, name="context"),
    path("sessions/<uuid:session_id>/timeline/", session.timeline_panel, name="timeline"),
    path("sessions/<uuid:session_id>/usage/turns/", session.turn_usage_panel, name="turn_usage"),
    path("sessions/<uuid:session_id>/archives/", records.archive_panel, name="archive"),
    path(
        "sessions/<uuid:session_id>/archives/<int:epoch>/messages/",
        records.archive_messages,
        name="archive_messages",
    ),
    path("sessions/<uuid:session_id>/inspector/", records.inspector_panel, name="inspector"),
    path(
        "sessions/<uuid:session_id>/model-calls/<int:call_id>/request.json",
        records.model_call_request_json,
        name="model_call_request",
    ),
    path("sessions/<uuid:session_id>/export.json", records.session_export, name="session_export"),
    path("approvals/", approvals.approvals_list, name="approvals"),
    path("sessions/<uuid:session_id>/approvals/answer/", approvals.approval_answer, name="approval_answer"),
    path("agents/", agents.agent_list, name="agents"),
    path("agents/new/", agents.agent_create, name="agent_create"),
    path("agents/<int:agent_id>/", agents.agent_detail, name="agent"),
    path("agents/<int:agent_id>/instructions/", agents.agent_instructions_edit, name="agent_instructions"),
    path("agents/<int:agent_id>/history/<str:part>/", agents.agent_history, name="agent_history"),
    path(
        "agents/<int:agent_id>/history/<str:part>/<int:version>/restore/",
        agents.agent_restore,
        name="agent_restore",
    ),
    path("agents/<int:agent_id>/skills/<str:name>/", agents.agent_skill, name="agent_skill"),
    path("agents/<int:agent_id>/learned/", agent_knowledge.agent_learned_edit, name="agent_learned"),
    path("agents/<int:agent_id>/state/edit/", agent_knowledge.agent_state_edit, name="agent_state_edit"),
    path(
        "agents/<int:agent_id>/state/delete/", agent_knowledge.agent_state_delete, name="agent_state_delete"
    ),
    # "new" is a valid skill name: a new skill's URL is not under skills/.
    path("agents/<int:agent_id>/new-skill/", agent_skills.agent_skill_new, name="agent_skill_new"),
    path(
        "agents/<int:agent_id>/skills-import/", agent_skills.agent_skills_import, name="agent_skills_import"
    ),
    path("agents/<int:agent_id>/skills.zip", agent_skills.agent_skills_export, name="agent_skills_export"),
    path(
        "agents/<int:agent_id>/skills/<str:name>/edit/",
        agent_skills.agent_skill_edit,
        name="agent_skill_edit",
    ),
    path(
        "agents/<int:agent_id>/skills/<str:name>/delete/",
        agent_skills.agent_skill_delete,
        name="agent_skill_delete",
    ),
    path(
        "agents/<int:agent_id>/skills/<str:name>/<int:version>/restore/",
        agent_skills.agent_skill_restore,
        name="agent_skill_restore",
    ),
    path("agents/<int:agent_id>/tools/<str:name>/", agent_tools.agent_tool, name="agent_tool"),
    path(
        "agents/<int:agent_id>/tools/<str:name>/switch/",
        agent_tools.agent_tool_switch,
        name="agent_tool_switch",
    ),
    path(
        "agents/<int:agent_id>/tools/<str:name>/<int:version>/restore/",
        agent_tools.agent_tool_restore,
        name="agent_tool_restore",
    ),
    path("agents/<int:agent_id>/search/", recall.agent_search, name="agent_search"),
    path("sessions/<uuid:session_id>/search/", recall.session_search, name="session_search"),
    path(
        "sessions/<uuid:session_id>/messages/<int:position>/",
        recall.message_in_place,
        name="message_in_place",
    ),
    # Each feature's views (`FeatureDashboard.urls`), their names in this namespace.
    *(path("", include(module)) for module in features().dashboard_urls),
]
