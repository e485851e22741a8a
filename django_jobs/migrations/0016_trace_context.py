"""Job.trace_context: the OpenTelemetry trace context an enqueue stores with its job.

A nullable column without a default: PostgreSQL adds it to the catalog only (no rewrite of the
table, the ACCESS EXCLUSIVE lock held for an instant), and MariaDB 10.3+ and MySQL 8.0.12+ add a
last column instantly (ALGORITHM=INSTANT), so a populated jobs table is neither rewritten nor
locked while workers run."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('django_jobs', '0015_dependency_kept_when_unmet'),
    ]

    operations = [
        migrations.AddField(
            model_name='job',
            name='trace_context',
            field=models.TextField(blank=True, editable=False, null=True),
        ),
    ]
