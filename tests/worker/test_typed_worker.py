"""A real ``runworker`` process runs typed handlers: each gets its arguments typed (the
dataclass rebuilt from the stored JSON, keyword arguments as keywords), and a stored payload
that does not fit its handler's arguments (written before they changed) goes dead at once."""

import pytest

from django_jobs.models import Job
from tests.typed_jobs import Line, Order, async_typed, geocode, send_email, ship

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_worker_process_gives_typed_handlers_their_typed_arguments(start_worker):
    shipped = ship.using(priority="high").enqueue(Order(id=1, lines=[Line("a", 2)], note="n"))
    emailed = send_email.enqueue(7, ratio=2)
    located = geocode.enqueue({"city": "Oslo", "zip": "0150", "floor": 3})
    awaited = async_typed.enqueue(Order(id=2, lines=[]), times=3)
    # A row written before a deploy changed the handler's arguments.
    unfit = Job.objects.create(type="typed_dataclass",
                               payload={"id": 1, "lines": [{"quantity": 1}]})
    worker = start_worker("--burst")
    assert worker.wait(timeout=120) == 0, worker.output()

    def read(job):
        return Job.objects.get(pk=job.pk)

    assert read(shipped).result == {"class": "Order", "line_class": "Line", "skus": ["a"],
                                    "units": 2, "pair_type": "tuple", "note": "n"}
    assert read(emailed).result == {"order_id": 7, "subject": "hello", "urgent": False,
                                    "ratio": 2.0, "ratio_type": "float"}
    assert read(located).result == {"type": "dict", "city": "Oslo", "floor": 3}
    assert read(awaited).result == {"class": "Order", "times": 3}
    dead = read(unfit)
    assert (dead.status, dead.attempt) == (Job.Status.DEAD, 1)
    assert "order.lines[0].sku is required" in dead.error["message"]
