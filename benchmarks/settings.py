"""Settings for ``benchmarks/throughput.py``: a dedicated PostgreSQL database, nothing else.

The benchmark creates and drops the database itself (``BENCH_DB_NAME``, default
``bench_django_jobs``); PGHOST, PGPORT and PGUSER say where PostgreSQL is.
"""

import os

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": os.environ.get("BENCH_DB_NAME", "bench_django_jobs"),
        "USER": os.environ.get("PGUSER", "postgres"),
        "PASSWORD": os.environ.get("PGPASSWORD", ""),
        "HOST": os.environ.get("PGHOST", "127.0.0.1"),
        "PORT": os.environ.get("PGPORT", "5432"),
        # The default (0) would close the connection after each request; the worker keeps its
        # connection whatever this says, and the benchmark has no requests.
        "CONN_MAX_AGE": None,
    }
}
SECRET_KEY = "benchmarks-only-not-secret"
USE_TZ = True
TIME_ZONE = "UTC"
INSTALLED_APPS = ["django_jobs", "benchmarks.noop_app"]
# BENCH_ADMIN=1: with Django's admin, for benchmarks that read through django_jobs.admin.
if os.environ.get("BENCH_ADMIN"):
    INSTALLED_APPS[:0] = ["django.contrib.admin", "django.contrib.auth",
                          "django.contrib.contenttypes", "django.contrib.sessions",
                          "django.contrib.messages"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# Extra DJANGO_JOBS keys as JSON, for one run's workers (benchmarks/pgbouncer.py).
DJANGO_JOBS: dict = __import__("json").loads(os.environ.get("BENCH_DJANGO_JOBS", "{}"))

# BENCH_JSON_LOGS=1: the worker's lines as JSON on stderr at INFO, through the site's LOGGING.
if os.environ.get("BENCH_JSON_LOGS"):
    LOGGING = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": "django_jobs.core.log_format.JSONFormatter"}},
        "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "json"}},
        "loggers": {"django_jobs": {"handlers": ["console"], "level": "INFO"}},
    }

# BENCH_OTEL: how the process meets OpenTelemetry (benchmarks/tracing_overhead.py)
__import__("benchmarks.tracing_setup").tracing_setup.configure(os.environ.get("BENCH_OTEL", ""))

# BENCH_SENTRY=1: sentry-sdk with django-jobs' integration, as docs/howto-error-trackers.md sets
# it up, sending to a port nobody listens on (benchmarks/observer_overhead.py).
if os.environ.get("BENCH_SENTRY"):
    import sentry_sdk

    from django_jobs.features.sentry import DjangoJobsIntegration

    sentry_sdk.init(dsn="http://public@127.0.0.1:9/1", integrations=[DjangoJobsIntegration()],
                    data_collection={"stack_frame_variables": False})

# BENCH_JOB_FINISHED=1: a job_finished receiver that counts (benchmarks/observer_overhead.py).
if os.environ.get("BENCH_JOB_FINISHED"):
    from django_jobs.signals import job_finished

    FINISHED = [0]

    def _count_finished(sender, **kwargs):
        FINISHED[0] += 1

    job_finished.connect(_count_finished, dispatch_uid="benchmarks.count_finished")
