"""The search documents (`recall`) of the offloaded observations already stored: each text
observation whose content is still kept, by its first characters, in the epoch of its turn.
Observations a compaction masked (`session_scope`) are left out: the message they were masked
in is indexed and holds the same result."""

from django.db import migrations

from sessions_app.common.recall_text import KIND_OBSERVATION, RECALL_TEXT_MAX_CHARS, ROLE_TOOL

BATCH = 100


def _text(chunk_model, observation_id):
    parts = []
    size = 0
    for text in chunk_model.objects.filter(observation_id=observation_id).order_by("index").values_list(
        "text", flat=True
    ):
        parts.append(text)
        size += len(text)
        if size >= RECALL_TEXT_MAX_CHARS:
            break
    return "".join(parts)[:RECALL_TEXT_MAX_CHARS]


def documents_build(apps, schema_editor):
    observation_model = apps.get_model("memory_app", "Observation")
    chunk_model = apps.get_model("memory_app", "ObservationChunk")
    message_model = apps.get_model("sessions_app", "Message")
    session_model = apps.get_model("sessions_app", "AgentSession")
    document_model = apps.get_model("sessions_app", "RecallDocument")
    last = ""
    while True:
        batch = list(
            observation_model.objects.filter(pk__gt=last, kind="text", session_scope=False)
            .order_by("pk")
            .only("pk", "session_id", "turn_id", "created_at")[:BATCH]
        )
        if not batch:
            break
        last = batch[-1].pk
        documents = []
        for observation in batch:
            text = _text(chunk_model, observation.pk)
            if not text.strip():
                continue  # its content was collected
            epoch = (
                message_model.objects.filter(turn_id=observation.turn_id)
                .order_by("position")
                .values_list("epoch", flat=True)
                .first()
            )
            if epoch is None:
                epoch = session_model.objects.values_list("epoch", flat=True).get(pk=observation.session_id)
            documents.append(
                document_model(
                    session_id=observation.session_id,
                    epoch=epoch,
                    kind=KIND_OBSERVATION,
                    role=ROLE_TOOL,
                    ref=observation.pk,
                    at=observation.created_at,
                    text=text,
                )
            )
        document_model.objects.bulk_create(documents)


def documents_remove(apps, schema_editor):
    apps.get_model("sessions_app", "RecallDocument").objects.filter(kind=KIND_OBSERVATION).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("memory_app", "0008_notepad_revision_chars"),
        ("sessions_app", "0019_recall_documents"),
    ]

    operations = [migrations.RunPython(documents_build, documents_remove)]
