"""Two indexes for the limits on what one token may create (issue 31): its sessions created in
the last minute (the sessions-per-minute quota, now counted in the database, sub-sessions
included) and its sub-sessions running a turn (the sub-sessions' per-client bound)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('sessions_app', '0013_archive_kind'),
    ]

    operations = [
        migrations.AddIndex(
            model_name='agentsession',
            index=models.Index(fields=['owner', 'created_at'], name='session_owner_created_idx'),
        ),
        migrations.AddIndex(
            model_name='agentsession',
            index=models.Index(condition=models.Q(('current_turn_id__isnull', False), ('depth__gte', 1)), fields=['owner'], name='session_owner_running_idx'),
        ),
    ]
