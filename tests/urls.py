import sys

from asgiref.sync import sync_to_async
from django.contrib import admin
from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.urls import include, path

from django_jobs.models import Job


class Refused(Exception):
    pass


async def async_enqueue(request: HttpRequest) -> JsonResponse:
    """An ``async def`` view that records a job (tests/engine/test_async_enqueue.py)."""
    job = await Job.aenqueue("echo", {"n": int(request.GET["n"])})
    return JsonResponse({"id": job.public_id})


def _place_order(n: int, fail: bool) -> str:
    """A unit of work: one synchronous function, one atomic block, the job in it."""
    with transaction.atomic():
        job = Job.enqueue("echo", {"n": n, "way": "function"})
        if fail:
            raise Refused
        return job.public_id


async def async_enqueue_atomic(request: HttpRequest) -> JsonResponse:
    """The two ways an async view enqueues in a transaction (docs/howto-async-enqueue.md):
    ``way=function`` runs the unit of work as one sync function with ``sync_to_async``;
    ``way=block`` opens ``transaction.atomic`` with ``sync_to_async`` and awaits ``aenqueue``
    inside it. ``fail=1`` rolls the transaction back (status 409)."""
    n, fail = int(request.GET["n"]), request.GET.get("fail") == "1"
    try:
        if request.GET["way"] == "function":
            public_id = await sync_to_async(_place_order)(n, fail)
        else:
            atomic = transaction.atomic()
            await sync_to_async(atomic.__enter__)()
            try:
                job = await Job.aenqueue("echo", {"n": n, "way": "block"})
                if fail:
                    raise Refused
            except BaseException:
                await sync_to_async(atomic.__exit__)(*sys.exc_info())
                raise
            await sync_to_async(atomic.__exit__)(None, None, None)
            public_id = job.public_id
    except Refused:
        return JsonResponse({"detail": "rolled back"}, status=409)
    return JsonResponse({"id": public_id})


urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("django_jobs.api.urls")),
    path("async-enqueue/", async_enqueue),
    path("async-enqueue-atomic/", async_enqueue_atomic),
]
