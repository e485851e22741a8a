"""The event loop kept per slot thread (``worker/slot_loop.py``) held to the plain path, a loop
per job (``async_jobs.run_in_new_loop``): the same results and errors, and nothing one job
leaves on the loop reaches the next. Each test runs on both paths, one ``SlotLoop`` running
several jobs one after another in this thread, as a slot thread runs them."""

import asyncio
import contextvars
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from django_jobs.exceptions import JobCanceled, JobTimeout
from django_jobs.worker import async_jobs, slot_loop
from django_jobs.worker.execution import QueryThread
from django_jobs.worker.slot_loop import SlotLoop
from tests.json_strategies import json_values

pytestmark = pytest.mark.db_independent  # no database: once per Django in the whole suite

paths = pytest.mark.parametrize("per_slot", [True, False], ids=["loop-per-slot", "loop-per-job"])
seen_var: contextvars.ContextVar[str] = contextvars.ContextVar("seen_var", default="unset")


class Boom(Exception):
    pass


class Jobs:
    """One slot's async jobs: ``run(coro)`` runs one, on the path asked for."""

    def __init__(self, per_slot: bool) -> None:
        self.per_slot = per_slot
        self.queries = QueryThread("test-queries")
        self.loop = SlotLoop(self.queries)

    def run(self, coro):
        previous, slot_loop.ENABLED = slot_loop.ENABLED, self.per_slot
        try:
            return self.loop.run(coro)
        finally:
            slot_loop.ENABLED = previous

    def close(self) -> None:
        self.queries.shutdown()  # closes the loop too


@pytest.fixture
def jobs(request):
    made: list[Jobs] = []

    def make(per_slot: bool) -> Jobs:
        made.append(Jobs(per_slot))
        return made[-1]

    yield make
    for each in made:
        each.close()


async def echo(value):
    await asyncio.sleep(0)
    return value


async def fail(value):
    await asyncio.sleep(0)
    raise Boom(value)


@given(values=st.lists(json_values(), min_size=1, max_size=5))
def test_results_and_errors_are_those_of_a_loop_per_job(values):
    fast, plain = Jobs(True), Jobs(False)
    try:
        for value in values:
            assert fast.run(echo(value)) == plain.run(echo(value)) == value
            errors = []
            for path in (fast, plain):
                with pytest.raises(Boom) as info:
                    path.run(fail(value))
                errors.append(info.value.args)
            assert errors == [(value,), (value,)]
    finally:
        fast.close()
        plain.close()


def test_clean_jobs_share_the_slots_loop_and_each_job_gets_its_own_on_the_plain_path(jobs):
    """What the fast path is for: the second job runs on the first one's loop."""
    async def loop_id():
        return id(asyncio.get_running_loop())

    fast, plain = jobs(True), jobs(False)
    first = fast.run(loop_id())
    assert fast.run(loop_id()) == first
    kept = plain.run(loop_id()), plain.run(loop_id())
    assert first not in kept


@paths
def test_between_jobs_the_thread_has_no_current_event_loop(jobs, per_slot):
    """A sync handler run between two async jobs cannot reach the kept loop."""
    async def current():
        return asyncio.get_event_loop() is asyncio.get_running_loop()

    slot = jobs(per_slot)
    assert slot.run(current())
    with pytest.raises(RuntimeError, match="no current event loop"):
        asyncio.get_event_loop_policy().get_event_loop()


@paths
def test_a_context_variable_set_by_a_job_is_unset_for_the_next(jobs, per_slot):
    async def read_then_set(value):
        before = seen_var.get()
        seen_var.set(value)
        await asyncio.sleep(0)
        return before, seen_var.get()

    slot = jobs(per_slot)
    assert slot.run(read_then_set("one")) == ("unset", "one")
    assert slot.run(read_then_set("two")) == ("unset", "two")
    assert seen_var.get() == "unset"


@paths
def test_a_task_a_job_leaves_pending_is_cancelled_before_the_next_job(jobs, per_slot):
    """The pending task gets CancelledError (its ``finally`` runs) when its job ends; the
    next job's loop holds no task but its own."""
    events = []

    async def forever():
        try:
            await asyncio.sleep(3600)
        finally:
            events.append("left task unwound")

    async def leave_a_task():
        asyncio.get_running_loop().create_task(forever())
        await asyncio.sleep(0)

    async def look():
        events.append("next job")
        return len(asyncio.all_tasks())

    slot = jobs(per_slot)
    slot.run(leave_a_task())
    assert slot.run(look()) == 1
    assert events == ["left task unwound", "next job"]


@paths
def test_a_callback_or_timer_a_job_leaves_never_runs_in_the_next(jobs, per_slot):
    ran = []

    async def leave_callbacks():
        loop = asyncio.get_running_loop()
        loop.call_later(0.01, ran.append, "timer")
        loop.call_soon(ran.append, "soon")  # runs in this job's last pass, or never
        return None

    async def wait_a_little():
        await asyncio.sleep(0.05)
        return list(ran)

    slot = jobs(per_slot)
    slot.run(leave_callbacks())
    assert "timer" not in slot.run(wait_a_little())


@paths
def test_an_async_generator_a_job_leaves_open_is_not_finished_in_the_next(jobs, per_slot):
    events = []

    async def numbers():
        try:
            for n in range(10):
                yield n
        finally:
            events.append("generator finished")

    held = []

    async def leave_a_generator():
        generator = numbers()
        held.append(generator)  # kept alive: only the loop's shutdown can finish it
        return await generator.__anext__()

    async def next_job():
        events.append("next job")
        await asyncio.sleep(0.01)
        events.append("next job done")

    slot = jobs(per_slot)
    assert slot.run(leave_a_generator()) == 0
    slot.run(next_job())
    assert events == ["generator finished", "next job", "next job done"]


@paths
def test_a_job_that_stops_the_loop_fails_and_the_next_job_runs(jobs, per_slot):
    async def stop_loop():
        asyncio.get_running_loop().stop()
        await asyncio.sleep(0.01)

    slot = jobs(per_slot)
    with pytest.raises(RuntimeError, match="stopped"):
        slot.run(stop_loop())
    assert slot.run(echo(5)) == 5


@paths
def test_loop_settings_a_job_changes_are_not_those_of_the_next(jobs, per_slot):
    async def change():
        loop = asyncio.get_running_loop()
        loop.set_debug(True)
        loop.set_exception_handler(lambda loop, context: None)
        loop.set_task_factory(None)
        await loop.run_in_executor(None, lambda: None)  # makes a default executor

    async def settings():
        loop = asyncio.get_running_loop()
        return loop.get_debug(), loop.get_exception_handler()

    slot = jobs(per_slot)
    slot.run(change())
    assert slot.run(settings()) == (False, None)


@paths
@pytest.mark.parametrize("exc_class", [JobTimeout, JobCanceled])
def test_an_interrupt_cancels_the_task_which_ends_with_the_exception(jobs, per_slot, exc_class):
    """``async_jobs.interrupt`` from another thread (the worker's loop): the handler unwinds
    from its ``await`` and the job ends with the exception; a late interrupt, for a job that
    has ended, does nothing to the next job."""
    events = []
    ident = threading.get_ident()

    async def sleeper():
        try:
            await asyncio.sleep(30)
        finally:
            events.append("unwound")

    timer = threading.Timer(0.2, async_jobs.interrupt, (ident, exc_class))
    timer.start()
    slot = jobs(per_slot)
    with pytest.raises(exc_class):
        slot.run(sleeper())
    timer.join()
    assert events == ["unwound"]
    assert async_jobs.interrupt(ident, exc_class) is False  # no async job runs here now
    assert slot.run(echo("after")) == "after"


@paths
def test_a_handler_that_swallows_the_cancel_completes(jobs, per_slot):
    async def stubborn():
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            return "kept going"

    threading.Timer(0.2, async_jobs.interrupt, (threading.get_ident(), JobTimeout)).start()
    assert jobs(per_slot).run(stubborn()) == "kept going"
