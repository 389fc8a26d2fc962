"""The messages' and events' own index on `session_id` goes: the unique (session, position),
`message_epoch_idx` and the unique (session, seq) all start with it, and each write updated it for
nothing (issue 12). The index is dropped by name, which Django gave it the same on every backend,
rather than by `AlterField`, which on SQLite copies the whole table to drop one index."""

import django.db.models.deletion
from django.db import migrations, models

INDEXES = (
    ("sessions_app_message", "sessions_app_message_session_id_a5aec9af"),
    ("sessions_app_sessionevent", "sessions_app_sessionevent_session_id_19649f05"),
)


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0008_ordering_by_column"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="message",
                    name="session",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="messages",
                        to="sessions_app.agentsession",
                    ),
                ),
                migrations.AlterField(
                    model_name="sessionevent",
                    name="session",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="events",
                        to="sessions_app.agentsession",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    sql=f'DROP INDEX IF EXISTS "{index}"',
                    reverse_sql=f'CREATE INDEX "{index}" ON "{table}" ("session_id")',
                )
                for table, index in INDEXES
            ],
        ),
    ]
