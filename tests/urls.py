from django.contrib import admin
from django.http import HttpRequest, JsonResponse
from django.urls import include, path

from django_jobs.models import Job


async def async_enqueue(request: HttpRequest) -> JsonResponse:
    """An ``async def`` view that records a job (tests/engine/test_async_enqueue.py)."""
    job = await Job.aenqueue("echo", {"n": int(request.GET["n"])})
    return JsonResponse({"id": job.public_id})


urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("django_jobs.api.urls")),
    path("async-enqueue/", async_enqueue),
]
