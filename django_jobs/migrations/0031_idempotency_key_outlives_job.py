"""An idempotency key outlives its job: it keeps the job's public id (what a replay answers),
and deleting the job empties ``job`` instead of deleting the key. The keys stored before get
their job's public id.

On PostgreSQL's partitioned jobs table the key's foreign key constraint is gone already
(``0028_partitions``): the column only becomes nullable. MariaDB and SQLite keep theirs.
"""

from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def fill_public_ids(apps, schema_editor):
    keys = apps.get_model("django_jobs", "IdempotencyKey")
    jobs = apps.get_model("django_jobs", "Job")
    using = schema_editor.connection.alias
    keys.objects.using(using).update(job_public_id=Subquery(
        jobs.objects.using(using).filter(pk=OuterRef("job_id")).values("public_id")[:1]))


class Migration(migrations.Migration):

    dependencies = [("django_jobs", "0030_group_error")]

    operations = [
        migrations.AddField(
            model_name="idempotencykey",
            name="job_public_id",
            field=models.CharField(blank=True, default="", max_length=24),
        ),
        migrations.RunPython(fill_public_ids, migrations.RunPython.noop, elidable=True),
        migrations.AlterField(
            model_name="idempotencykey",
            name="job",
            field=models.ForeignKey(blank=True, null=True, on_delete=models.deletion.SET_NULL,
                                    related_name="+", to="django_jobs.job"),
        ),
    ]
