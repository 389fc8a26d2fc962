"""Parts of model requests stored once and named by their hash in call records (issue 12: a
record kept the same ~7 KB of tools at every step)."""

import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("sessions_app", "0009_session_fk_indexes_covered"),
    ]

    operations = [
        migrations.CreateModel(
            name="RequestPart",
            fields=[
                ("sha256", models.CharField(max_length=64, primary_key=True, serialize=False)),
                ("text", models.TextField()),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
            ],
        ),
    ]
