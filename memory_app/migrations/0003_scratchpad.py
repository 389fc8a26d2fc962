# The scratchpad spaces (seed 003). Numbered 0003: the notepad's 0002 comes before it at merge.

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('memory_app', '0002_notepad'),
        ('sessions_app', '0001_initial'),
    ]

    operations = [
        migrations.CreateModel(
            name='Scratchpad',
            fields=[
                ('created_at', models.DateTimeField(db_index=True, default=django.utils.timezone.now, editable=False)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('session', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='scratchpad', serialize=False, to='sessions_app.agentsession')),
                ('notes', models.TextField(blank=True, default='')),
                ('plan', models.TextField(blank=True, default='')),
                ('refs', models.JSONField(blank=True, default=list)),
                ('notes_version', models.PositiveIntegerField(default=0)),
                ('plan_version', models.PositiveIntegerField(default=0)),
                ('refs_version', models.PositiveIntegerField(default=0)),
                ('changed_at_turn', models.PositiveIntegerField(default=0)),
            ],
            options={
                'verbose_name': 'scratchpad',
            },
        ),
        migrations.CreateModel(
            name='ScratchpadRevision',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('space', models.CharField(choices=[('notes', 'Notes'), ('plan', 'Plan'), ('refs', 'Refs')], max_length=8)),
                ('version', models.PositiveIntegerField()),
                ('value', models.JSONField()),
                ('author', models.CharField(max_length=200)),
                ('action', models.CharField(max_length=16)),
                ('created_at', models.DateTimeField(db_index=True, default=django.utils.timezone.now)),
                ('session', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='scratchpad_revisions', to='sessions_app.agentsession')),
            ],
            options={
                'ordering': ['session', 'space', 'version'],
                'constraints': [models.UniqueConstraint(fields=('session', 'space', 'version'), name='scratchpad_revision_unique_version'), models.CheckConstraint(condition=models.Q(('version__gte', 1)), name='scratchpad_revision_version_from_one')],
            },
        ),
    ]
