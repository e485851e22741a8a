"""Workflows: dependencies' names (``dependency_results()``), a dependent's policy for a
dependency that goes dead or is canceled (``Job.on_dependency_failure``), and groups of jobs
(``JobGroup``, ``JobGroupMember``, ``Job.group``).

Every change keeps the rows as they are and takes no long lock on a populated table: nullable
columns without a default (an ``ADD COLUMN`` that writes no row on PostgreSQL, MariaDB and
SQLite alike) and new tables, whose indexes are built empty. ``Job.group`` has no database constraint and no
index, so no index is built on the jobs table: a group's jobs are read through
``JobGroupMember``'s unique (group, job) index instead.
"""

import django.db.models.deletion
import django.utils.timezone
import django_jobs.models.groups
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('django_jobs', '0016_trace_context'),
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
        migrations.CreateModel(
            name='JobGroup',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('public_id', models.CharField(default=django_jobs.models.groups.new_group_id, editable=False, max_length=24)),
                ('name', models.CharField(blank=True, default='', max_length=200)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('total', models.PositiveIntegerField(default=0)),
                ('completed', models.PositiveIntegerField(default=0)),
                ('dead', models.PositiveIntegerField(default=0)),
                ('canceled', models.PositiveIntegerField(default=0)),
                ('callback_type', models.CharField(max_length=100)),
                ('callback_payload', models.JSONField(blank=True, null=True)),
                ('callback_options', models.JSONField(blank=True, default=dict)),
                ('callback_job_id', models.BigIntegerField(blank=True, null=True)),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
            ],
            options={
                'indexes': [models.Index(fields=['-created_at'], name='django_jobs_group_created_idx')],
                'constraints': [models.UniqueConstraint(fields=('public_id',), name='django_jobs_group_public_id_key')],
            },
        ),
        migrations.AddField(
            model_name='job',
            name='group',
            field=models.ForeignKey(blank=True, db_constraint=False, db_index=False, editable=False, null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='django_jobs.jobgroup'),
        ),
        migrations.CreateModel(
            name='JobGroupMember',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('group', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='members', to='django_jobs.jobgroup')),
                ('job', models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='django_jobs.job')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('group', 'job'), name='django_jobs_group_member_once')],
            },
        ),
    ]
