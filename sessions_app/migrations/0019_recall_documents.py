"""The long-term search index (`recall`): its documents' table, the database's own full-text
index of them (SQLite: an FTS5 external-content table kept by triggers; PostgreSQL: a stored
generated tsvector column with a GIN index), and the documents of what is already stored (messages and archive
summaries, read in batches; the observations feature's migration adds its own)."""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models

from sessions_app.common.recall_text import (
    KIND_MESSAGE,
    KIND_SUMMARY,
    ROLE_SUMMARY,
    message_indexed,
    message_search_role,
    message_search_text,
    text_for_index,
)

# The names as they stand in this migration (the models' constants may change later).
TABLE = "sessions_app_recalldocument"
FTS = "sessions_app_recalldocument_fts"
TS_CONFIG = "english"
PG_INDEX = "recall_text_fts_idx"
BATCH = 200

SQLITE_CREATE = [
    f"CREATE VIRTUAL TABLE {FTS} USING fts5(text, content='{TABLE}', content_rowid='id', "
    "tokenize='porter unicode61')",
    f"CREATE TRIGGER {FTS}_ai AFTER INSERT ON {TABLE} BEGIN "
    f"INSERT INTO {FTS}(rowid, text) VALUES (new.id, new.text); END",
    f"CREATE TRIGGER {FTS}_ad AFTER DELETE ON {TABLE} BEGIN "
    f"INSERT INTO {FTS}({FTS}, rowid, text) VALUES ('delete', old.id, old.text); END",
    f"CREATE TRIGGER {FTS}_au AFTER UPDATE ON {TABLE} BEGIN "
    f"INSERT INTO {FTS}({FTS}, rowid, text) VALUES ('delete', old.id, old.text); "
    f"INSERT INTO {FTS}(rowid, text) VALUES (new.id, new.text); END",
]
SQLITE_DROP = [f"DROP TRIGGER IF EXISTS {FTS}_{t}" for t in ("ai", "ad", "au")] + [
    f"DROP TABLE IF EXISTS {FTS}"
]
PG_VECTOR = "search_vector"
# The text's vector is stored (a generated column the database fills): ranking reads it instead
# of parsing every matching text again, and the GIN index is over it.
PG_CREATE = [
    f"ALTER TABLE {TABLE} ADD COLUMN {PG_VECTOR} tsvector "
    f"GENERATED ALWAYS AS (to_tsvector('{TS_CONFIG}', text)) STORED",
    f"CREATE INDEX {PG_INDEX} ON {TABLE} USING GIN ({PG_VECTOR})",
]
PG_DROP = [f"DROP INDEX IF EXISTS {PG_INDEX}", f"ALTER TABLE {TABLE} DROP COLUMN IF EXISTS {PG_VECTOR}"]


def _run(schema_editor, statements_by_vendor):
    for sql in statements_by_vendor.get(schema_editor.connection.vendor, []):
        schema_editor.execute(sql)


def fulltext_create(apps, schema_editor):
    _run(schema_editor, {"sqlite": SQLITE_CREATE, "postgresql": PG_CREATE})


def fulltext_drop(apps, schema_editor):
    _run(schema_editor, {"sqlite": SQLITE_DROP, "postgresql": PG_DROP})


def documents_build(apps, schema_editor):
    """A document for each message holding its content (a fork's copies share their holders')
    and each archive's summary, BATCH rows at a time (keyset pages: no table in memory)."""
    message_model = apps.get_model("sessions_app", "Message")
    archive_model = apps.get_model("sessions_app", "Archive")
    document_model = apps.get_model("sessions_app", "RecallDocument")
    last = 0
    while True:
        batch = list(
            message_model.objects.filter(pk__gt=last, content__isnull=False)
            .order_by("pk")
            .only("pk", "session_id", "epoch", "role", "content", "metadata", "created_at")[:BATCH]
        )
        if not batch:
            break
        last = batch[-1].pk
        documents = []
        for m in batch:
            metadata = m.metadata if isinstance(m.metadata, dict) else {}
            if metadata.get("type") == "carried":
                # Carried verbatim into a later epoch: its original's document moves to it (as
                # `recall_documents_carry` does); the original, written earlier, is indexed.
                document_model.objects.bulk_create(documents)
                documents = []
                document_model.objects.filter(
                    session_id=m.session_id, message__position=metadata.get("from_position")
                ).update(message_id=m.pk, epoch=m.epoch)
                continue
            text = message_search_text(m.content)
            if message_indexed(m.metadata) and text.strip():
                documents.append(
                    document_model(
                        session_id=m.session_id,
                        epoch=m.epoch,
                        message_id=m.pk,
                        kind=KIND_MESSAGE,
                        role=message_search_role(m.role, m.content),
                        at=m.created_at,
                        text=text,
                    )
                )
        document_model.objects.bulk_create(documents)
    last_archive = None
    while True:
        archives = archive_model.objects.order_by("pk")
        if last_archive is not None:
            archives = archives.filter(pk__gt=last_archive)
        archives = list(archives[:BATCH])
        if not archives:
            break
        last_archive = archives[-1].pk
        document_model.objects.bulk_create(
            document_model(
                session_id=a.session_id,
                epoch=a.epoch,
                kind=KIND_SUMMARY,
                role=ROLE_SUMMARY,
                ref=str(a.pk),
                at=a.created_at,
                text=text_for_index(a.summary),
            )
            for a in archives
        )


def documents_remove(apps, schema_editor):
    apps.get_model("sessions_app", "RecallDocument").objects.all().delete()


class Migration(migrations.Migration):

    dependencies = [
        ('sessions_app', '0018_agent_tools'),
    ]

    operations = [
        migrations.CreateModel(
            name='RecallDocument',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('epoch', models.PositiveIntegerField()),
                ('kind', models.CharField(max_length=16)),
                ('role', models.CharField(max_length=16)),
                ('ref', models.CharField(blank=True, default='', max_length=64)),
                ('at', models.DateTimeField(default=django.utils.timezone.now)),
                ('text', models.TextField()),
                ('message', models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='sessions_app.message')),
                ('session', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='sessions_app.agentsession')),
            ],
            options={
                'ordering': ['session_id', 'epoch', 'id'],
                'indexes': [models.Index(fields=['session', 'epoch'], name='recall_session_epoch_idx'), models.Index(condition=models.Q(('message__isnull', False)), fields=['message'], name='recall_message_idx'), models.Index(condition=models.Q(('ref', ''), _negated=True), fields=['ref'], name='recall_ref_idx')],
            },
        ),
        migrations.RunPython(fulltext_create, fulltext_drop),
        migrations.RunPython(documents_build, documents_remove),
    ]
