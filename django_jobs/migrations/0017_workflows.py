"""Workflows: dependencies' names (``dependency_results()``), a dependent's policy for a
dependency that goes dead or is canceled (``Job.on_dependency_failure``).

Every change keeps the rows as they are and takes no long lock on a populated table: nullable
columns (no default to write into existing rows) and new tables."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('django_jobs', '0015_dependency_kept_when_unmet'),
    ]

    operations = [
        migrations.AddField(
            model_name='job',
            name='on_dependency_failure',
            field=models.CharField(blank=True, choices=[('cancel', 'Cancel'), ('run', 'Run anyway')], max_length=8, null=True),
        ),
        migrations.AddField(
            model_name='jobdependency',
            name='name',
            field=models.CharField(blank=True, max_length=100, null=True),
        ),
    ]
