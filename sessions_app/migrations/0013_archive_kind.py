from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0012_turn_lease_process"),
    ]

    operations = [
        migrations.AddField(
            model_name="archive",
            name="kind",
            field=models.CharField(default="history", max_length=16),
        ),
    ]
