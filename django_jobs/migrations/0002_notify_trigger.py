"""On PostgreSQL, NOTIFY idle workers when jobs are inserted or become pending again."""

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION django_jobs_notify() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('django_jobs', '');
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER django_jobs_insert_notify
    AFTER INSERT ON django_jobs_job
    FOR EACH STATEMENT EXECUTE FUNCTION django_jobs_notify();
CREATE TRIGGER django_jobs_pending_notify
    AFTER UPDATE OF status ON django_jobs_job
    FOR EACH ROW WHEN (NEW.status = 'pending' AND OLD.status <> 'pending')
    EXECUTE FUNCTION django_jobs_notify();
"""

DROP = """
DROP TRIGGER IF EXISTS django_jobs_pending_notify ON django_jobs_job;
DROP TRIGGER IF EXISTS django_jobs_insert_notify ON django_jobs_job;
DROP FUNCTION IF EXISTS django_jobs_notify();
"""


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [("django_jobs", "0001_initial")]
    operations = [migrations.RunPython(forwards, backwards)]
