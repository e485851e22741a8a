"""Mount with ``path("api/", include("django_jobs.api.urls"))``; the prefix is the site's."""

from django.urls import path, re_path

from django_jobs.api import views_jobs, views_manage, views_metrics, views_queues
from django_jobs.api.errors import not_found

app_name = "django_jobs_api"

urlpatterns = [
    path("jobs", views_jobs.jobs, name="jobs"),
    path("jobs/<str:job_id>/cancel", views_manage.cancel, name="job-cancel"),
    path("jobs/<str:job_id>/retry", views_manage.retry, name="job-retry"),
    path("jobs/<str:job_id>", views_jobs.job_detail, name="job-detail"),
    path("queues", views_queues.queues, name="queues"),
    path("queues/<str:name>/pause", views_queues.pause, name="queue-pause"),
    path("queues/<str:name>/resume", views_queues.resume, name="queue-resume"),
    path("metrics/jobs", views_metrics.metrics, name="metrics"),
    path("openapi.json", views_metrics.openapi, name="openapi"),
    # Every other path under the mount, a trailing slash included: a JSON 404, not Django's page.
    re_path(r"^", not_found, name="not-found"),
]
