# The memory app starts empty; the notepad, scratchpad and observation tables follow.
from django.db import migrations


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("sessions_app", "0001_initial"),
    ]

    operations = []
