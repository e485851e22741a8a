"""One event loop per slot thread, kept for its async jobs: the fast path of
``worker/async_jobs.py``'s ``run_in_new_loop``, which makes and closes a loop for each job.

Making a loop and closing it (a selector, a self-pipe, the async generators' and the default
executor's shutdown) costs about ten times what running a trivial coroutine on a loop that
exists costs. Here a slot thread keeps its loop from one async job to the next, and each job
still starts as on a new loop:

- the task runs in a copy of the slot thread's context (``run_task``), so a context variable
  a handler sets is gone for the next job;
- if a job leaves anything on the loop that would outlive it on a loop of its own (a task
  still pending, a callback or timer still due, an async generator not finished, a default
  executor, an exception handler, task factory or debug mode of its own), or stopped or
  closed the loop, the loop is closed after the job as ``run_in_new_loop`` closes every loop
  (the pending tasks are cancelled and awaited, the generators finished, the executor shut
  down), and the next job gets a new one.

What is looked at includes attributes of asyncio's own loop that are not public
(``_ready``, ``_scheduled``, ``_asyncgens``, ``_default_executor``): a loop without them (an
event loop policy of the site's, uvloop) is closed after every job, as on the plain path.
``ENABLED`` switches the fast path off (tests/worker/test_slot_loop.py runs both and holds
them to the same outcomes; benchmarks/async_handlers.py measures one against the other).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from asgiref.sync import AsyncToSync

from django_jobs.worker.async_jobs import run_in_new_loop, run_task

ENABLED = True

_MISSING = object()


class SlotLoop:
    """The event loop of one slot thread's async jobs, queries to ``executor``."""

    def __init__(self, executor: Any) -> None:
        self.executor = executor
        self._runner: asyncio.Runner | None = None

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Run ``coro`` in this (the slot) thread, as ``run_in_new_loop`` does."""
        if not ENABLED:
            return run_in_new_loop(coro, self.executor)
        loop = self._loop()
        asyncio.set_event_loop(loop)  # the thread's loop while the job runs, as asyncio.run's
        try:
            return run_task(loop, coro)
        finally:
            asyncio.set_event_loop(None)  # and not between jobs: a sync handler cannot reach it
            if not _clean(loop):
                self.close()

    def close(self) -> None:
        """Close the loop as ``asyncio.Runner`` does (nothing to do without one)."""
        runner, self._runner = self._runner, None
        if runner is None:
            return
        loop = runner.get_loop()
        try:
            runner.close()
        finally:
            AsyncToSync.loop_thread_executors.pop(loop, None)

    def _loop(self) -> asyncio.AbstractEventLoop:
        if self._runner is None:
            # With a loop factory the runner leaves the thread's current loop alone: ``run``
            # sets it for each job only.
            self._runner = asyncio.Runner(loop_factory=asyncio.new_event_loop)
            AsyncToSync.loop_thread_executors[self._runner.get_loop()] = self.executor
        return self._runner.get_loop()


def _clean(loop: asyncio.AbstractEventLoop) -> bool:
    """True if ``loop`` is as a new loop would be: nothing of the last job is left on it."""
    if loop.is_closed() or loop.is_running():
        return False
    return _nothing_queued(loop) and not asyncio.all_tasks(loop) and _as_made(loop)


def _nothing_queued(loop: asyncio.AbstractEventLoop) -> bool:
    """No callback ready or scheduled (and not cancelled), no async generator, no executor of
    its own; False when the loop's internals are not those of asyncio's own loop."""
    ready = getattr(loop, "_ready", _MISSING)
    scheduled = getattr(loop, "_scheduled", _MISSING)
    asyncgens = getattr(loop, "_asyncgens", _MISSING)
    executor = getattr(loop, "_default_executor", _MISSING)
    if ready is _MISSING or scheduled is _MISSING or asyncgens is _MISSING \
            or executor is not None:
        return False
    return not (ready or asyncgens
                or any(not handle.cancelled() for handle in scheduled))  # type: ignore[attr-defined]


def _as_made(loop: asyncio.AbstractEventLoop) -> bool:
    """No exception handler, task factory or debug mode a job set on it."""
    return (loop.get_exception_handler() is None and loop.get_task_factory() is None
            and loop.get_debug() == _default_debug())


def _default_debug() -> bool:
    return asyncio.coroutines._is_debug_mode()  # type: ignore[attr-defined]
