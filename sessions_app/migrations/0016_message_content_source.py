"""A fork's copies share their originals' contents (issue 31 item 2): `Message.content_source`.

The data step makes the copies forks already stored share too, where their content is still
the original's (a copy that lost a block at the cut keeps its own): fork by fork from the top
of each tree down, so that a fork of a fork names the row holding the content, never another
copy. Undone by giving each copy its content back.
"""

import django.db.models.deletion
from django.db import migrations, models

# A forked copy's metadata names its source: {"type": "forked", "from_session", "from_position"}.
_SOURCE = {
    "postgresql": (
        "m.metadata ->> 'type' = 'forked'",
        "s.session_id::text = m.metadata ->> 'from_session' AND s.position::text = m.metadata ->> 'from_position'",
    ),
    # UUIDs are stored as 32 hex digits on SQLite; the metadata has them with dashes.
    "sqlite": (
        "json_extract(m.metadata, '$.type') = 'forked'",
        "s.session_id = replace(json_extract(m.metadata, '$.from_session'), '-', '') "
        "AND s.position = json_extract(m.metadata, '$.from_position')",
    ),
}


def _checks_now(connection, cursor):
    """PostgreSQL: check the foreign keys at each statement, so that no deferred check is left
    pending when the schema is altered next in this transaction (which PostgreSQL refuses)."""
    if connection.vendor == "postgresql":
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")


def copies_share(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor not in _SOURCE:
        return
    forked, same_source = _SOURCE[connection.vendor]
    qn = connection.ops.quote_name
    message = qn(apps.get_model("sessions_app", "Message")._meta.db_table)
    session_model = apps.get_model("sessions_app", "AgentSession")
    session = qn(session_model._meta.db_table)
    # The row that holds the source's content, where that content is the copy's.
    holder = (
        f"SELECT COALESCE(s.content_source_id, s.id) FROM {message} AS s "
        f"LEFT JOIN {message} AS h ON h.id = s.content_source_id "
        f"WHERE {same_source} AND COALESCE(h.content, s.content) = m.content"
    )
    depths = sorted(set(session_model.objects.filter(depth__gte=1).values_list("depth", flat=True)))
    with connection.cursor() as cursor:
        _checks_now(connection, cursor)
        for depth in depths:
            # A fork's source is in its parent, one level up: done already, and not changed here.
            cursor.execute(
                f"UPDATE {message} AS m SET content_source_id = ({holder}), content = NULL "
                f"WHERE m.content_source_id IS NULL AND {forked} "
                f"AND m.session_id IN (SELECT id FROM {session} WHERE depth = %s) AND EXISTS ({holder})",
                [depth],
            )


def copies_hold(apps, schema_editor):
    qn = schema_editor.connection.ops.quote_name
    message = qn(apps.get_model("sessions_app", "Message")._meta.db_table)
    with schema_editor.connection.cursor() as cursor:
        _checks_now(schema_editor.connection, cursor)
        cursor.execute(
            f"UPDATE {message} SET content = (SELECT h.content FROM {message} AS h "
            f"WHERE h.id = {message}.content_source_id), content_source_id = NULL "
            "WHERE content_source_id IS NOT NULL"
        )


class Migration(migrations.Migration):

    dependencies = [
        ('sessions_app', '0015_context_pins'),
    ]

    operations = [
        migrations.AddField(
            model_name='message',
            name='content_source',
            field=models.ForeignKey(blank=True, db_index=False, editable=False, null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name='content_sharers', to='sessions_app.message'),
        ),
        migrations.AlterField(
            model_name='message',
            name='content',
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddIndex(
            model_name='message',
            index=models.Index(condition=models.Q(('content_source__isnull', False)), fields=['content_source'], name='message_content_source_idx'),
        ),
        migrations.AddConstraint(
            model_name='message',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('content__isnull', False), ('content_source__isnull', True)), models.Q(('content__isnull', True), ('content_source__isnull', False)), _connector='OR'), name='message_content_held_or_shared'),
        ),
        migrations.RunPython(copies_share, copies_hold),
    ]
