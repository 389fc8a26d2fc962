from django.db import migrations, models
from django.db.models.functions import Length


def chars_fill(apps, schema_editor):
    NotepadRevision = apps.get_model("memory_app", "NotepadRevision")
    NotepadRevision.objects.update(chars=Length("content"))


class Migration(migrations.Migration):

    dependencies = [
        ('memory_app', '0007_ordering_by_column'),
    ]

    operations = [
        migrations.AddField(
            model_name='notepadrevision',
            name='chars',
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name='notepadrevision',
            name='pruned',
            field=models.BooleanField(default=False),
        ),
        migrations.RunPython(chars_fill, migrations.RunPython.noop),
    ]
