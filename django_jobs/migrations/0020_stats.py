"""The finished jobs counted per minute and per hour, worker, queue, type and outcome
(``JobStat``), which the engine adds to as it writes outcomes and the admin overview's charts
read."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('django_jobs', '0018_wakeups'),
    ]

    operations = [
        migrations.CreateModel(
            name='JobStat',
            fields=[
                ('id', models.BigAutoField(primary_key=True, serialize=False)),
                ('span', models.PositiveSmallIntegerField(default=1)),
                ('bucket', models.DateTimeField()),
                ('worker_id', models.CharField(max_length=100)),
                ('queue', models.CharField(max_length=100)),
                ('type', models.CharField(max_length=100)),
                ('outcome', models.CharField(max_length=16)),
                ('count', models.BigIntegerField(default=0)),
                ('wait_sum_us', models.BigIntegerField(default=0)),
                ('run_sum_us', models.BigIntegerField(default=0)),
                ('wait_le_0', models.BigIntegerField(default=0)),
                ('wait_le_1', models.BigIntegerField(default=0)),
                ('wait_le_2', models.BigIntegerField(default=0)),
                ('wait_le_3', models.BigIntegerField(default=0)),
                ('wait_le_4', models.BigIntegerField(default=0)),
                ('wait_le_5', models.BigIntegerField(default=0)),
                ('wait_le_6', models.BigIntegerField(default=0)),
                ('wait_le_7', models.BigIntegerField(default=0)),
                ('wait_le_8', models.BigIntegerField(default=0)),
                ('wait_le_9', models.BigIntegerField(default=0)),
                ('wait_le_10', models.BigIntegerField(default=0)),
                ('wait_le_11', models.BigIntegerField(default=0)),
            ],
            options={
                'indexes': [models.Index(fields=['span', 'bucket'], name='django_jobs_stat_bucket')],
                'constraints': [models.UniqueConstraint(fields=('worker_id', 'span', 'bucket', 'queue', 'type', 'outcome'), name='django_jobs_stat_key')],
            },
        ),
    ]
