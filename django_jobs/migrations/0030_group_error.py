"""A group's ``error``: why a write of the group's that follows the end of one of its jobs (its
callback job, its counts) could not be made. A nullable column: no row is rewritten."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("django_jobs", "0029_completed_open_index")]

    operations = [
        migrations.AddField(
            model_name="jobgroup", name="error",
            field=models.JSONField(blank=True, null=True),
        ),
    ]
