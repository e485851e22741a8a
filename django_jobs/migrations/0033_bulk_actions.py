"""Actions over a filter: their table, and the permission to start one."""


import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('django_jobs', '0032_wakeups_without_writes'),
    ]

    operations = [
        migrations.CreateModel(
            name='BulkAction',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('verb', models.CharField(choices=[('retry', 'Retry'), ('cancel', 'Cancel'), ('delete', 'Delete')], max_length=8)),
                ('spec', models.JSONField(default=dict)),
                ('description', models.CharField(blank=True, default='', max_length=500)),
                ('bound', models.BigIntegerField()),
                ('cursor', models.BigIntegerField(default=0)),
                ('matched', models.BigIntegerField(blank=True, null=True)),
                ('matched_capped', models.BooleanField(default=False)),
                ('changed', models.BigIntegerField(default=0)),
                ('skipped', models.BigIntegerField(default=0)),
                ('created_by', models.CharField(blank=True, default='', max_length=150)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
                ('job_id', models.BigIntegerField(blank=True, null=True)),
            ],
            options={
                'verbose_name': 'action over a filter',
                'verbose_name_plural': 'actions over a filter',
                'ordering': ['-created_at'],
            },
        ),
        migrations.AlterModelOptions(
            name='job',
            options={'permissions': [('retry_job', 'Can retry jobs'), ('cancel_job', 'Can cancel jobs'), ('act_on_filter_job', 'Can retry, cancel or delete every job matching a filter')]},
        ),
    ]
