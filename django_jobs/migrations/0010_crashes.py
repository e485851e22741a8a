"""Job.crashes: crashes of a worker process holding the job, counted apart from errors."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('django_jobs', '0008_status_index_partial'),
    ]

    operations = [
        migrations.AddField(
            model_name='job',
            name='crashes',
            field=models.PositiveSmallIntegerField(default=0),
        ),
    ]
