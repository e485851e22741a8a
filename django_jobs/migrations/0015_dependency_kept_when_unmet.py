"""JobDependency keeps the link to a job deleted before it completed: ``depends_on`` empty, the
status that job had in ``deleted_status``, so its dependent keeps waiting. Both changes keep
the rows as they are: a column with a constant default, a column made nullable."""

import django_jobs.models
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('django_jobs', '0014_mariadb_overview_and_filter_indexes'),
    ]

    operations = [
        migrations.AddField(
            model_name='jobdependency',
            name='deleted_status',
            field=models.CharField(blank=True, choices=[('pending', 'Pending'), ('processing', 'Processing'), ('completed', 'Completed'), ('failed', 'Failed'), ('dead', 'Dead'), ('canceled', 'Canceled'), ('waiting', 'Waiting')], default='', max_length=16),
        ),
        migrations.AlterField(
            model_name='jobdependency',
            name='depends_on',
            field=models.ForeignKey(blank=True, null=True, on_delete=django_jobs.models.keep_unmet_dependency, related_name='dependents', to='django_jobs.job'),
        ),
    ]
