"""Workflows' histories: ``WorkflowStep`` (a workflow's checkpoints, unique per workflow job and
step key, and per position) and ``WorkflowEvent`` (the events sent to it, unique per workflow
job and event id), each with an index on ``created_at`` for retention. New tables only:
nothing is written to or locked on the jobs table."""

import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('django_jobs', '0033_bulk_actions'),
    ]

    operations = [
        migrations.CreateModel(
            name='WorkflowEvent',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('job_id', models.BigIntegerField()),
                ('name', models.CharField(max_length=100)),
                ('event_id', models.CharField(max_length=100)),
                ('payload', models.JSONField(blank=True, null=True)),
                ('taken_by', models.CharField(blank=True, default='', max_length=200)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={
                'indexes': [models.Index(fields=['job_id', 'name'], name='django_jobs_wfevent_job_name'), models.Index(fields=['created_at'], name='django_jobs_wfevent_created')],
                'constraints': [models.UniqueConstraint(fields=('job_id', 'event_id'), name='django_jobs_wfevent_job_event')],
            },
        ),
        migrations.CreateModel(
            name='WorkflowStep',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('job_id', models.BigIntegerField()),
                ('key', models.CharField(max_length=200)),
                ('position', models.PositiveIntegerField()),
                ('kind', models.CharField(max_length=8)),
                ('result', models.JSONField(blank=True, null=True)),
                ('until', models.DateTimeField(blank=True, null=True)),
                ('done', models.BooleanField(default=True)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={
                'indexes': [models.Index(fields=['created_at'], name='django_jobs_wfstep_created')],
                'constraints': [models.UniqueConstraint(fields=('job_id', 'key'), name='django_jobs_wfstep_job_key'), models.UniqueConstraint(fields=('job_id', 'position'), name='django_jobs_wfstep_job_position')],
            },
        ),
    ]
