"""How a slot thread runs an ``async def`` handler, and how a cancel or a timeout reaches it.

The handler's coroutine runs as one task on an event loop in the slot thread, its queries in
the slot's ``QueryThread`` (``worker/execution.py``). The plain way, ``run_in_new_loop``, gives
each job a loop of its own, closed when the job ends (``asyncio.run``);
``worker/slot_loop.py`` keeps one loop per slot thread instead.

A sync handler is stopped by raising the exception in its thread (``Slot.interrupt``). That
cannot stop an async one: its thread waits in the loop's ``select()`` and would see the
exception only when the awaited thing is done, maybe long past the timeout, and then inside
the loop's own code rather than the handler's. So ``interrupt`` wakes the loop and cancels the
job's task: the handler gets ``CancelledError`` at the ``await`` it is in (its ``finally``
blocks and ``async with`` exits run), and the attempt ends with ``JobCanceled`` or
``JobTimeout``, as a sync handler's would. A handler that swallows the cancel and returns
completes, as a sync handler that catches the exception does. A handler that blocks its loop in
synchronous code sees the cancel only at its next ``await``; past a timeout's grace its thread
is abandoned, as a sync handler blocked in C code is (``worker/executor.py``).
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Coroutine
from typing import Any

from asgiref.sync import AsyncToSync

# The task each slot thread is running (by thread ident), and the exception each task that
# ``interrupt`` cancelled is to end with.
_running: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Task]] = {}
_interrupts: dict[asyncio.Task, type[BaseException]] = {}


def run_task(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any]) -> Any:
    """Run ``coro`` to its end as a task of ``loop`` (not running) in this thread, in a copy
    of this thread's context, where ``interrupt`` can stop it; returns its result."""
    task = loop.create_task(coro, context=contextvars.copy_context())
    ident = threading.get_ident()
    _running[ident] = (loop, task)
    try:
        return loop.run_until_complete(task)
    except asyncio.CancelledError:
        exc_class = _interrupts.get(task)
        if exc_class is None:
            raise
        raise exc_class() from None
    finally:
        _running.pop(ident, None)
        _interrupts.pop(task, None)


def run_in_new_loop(coro: Coroutine[Any, Any, Any], executor: Any) -> Any:
    """``asyncio.run(coro)``, with ``executor`` for the loop's thread-sensitive code (the
    async ORM's queries): a loop for this job alone, closed when it ends."""
    with asyncio.Runner() as runner:
        loop = runner.get_loop()
        AsyncToSync.loop_thread_executors[loop] = executor
        try:
            return run_task(loop, coro)
        finally:
            AsyncToSync.loop_thread_executors.pop(loop, None)


def interrupt(ident: int, exc_class: type[BaseException]) -> bool:
    """If the thread ``ident`` is running an async job, cancel its task, to end with
    ``exc_class``; False if it runs none (a sync job, or none at all). Safe from any thread."""
    found = _running.get(ident)
    if found is None:
        return False
    loop, task = found
    try:
        loop.call_soon_threadsafe(_cancel, task, exc_class)
    except RuntimeError:  # the loop is closed: the job has just ended
        pass
    return True


def _cancel(task: asyncio.Task, exc_class: type[BaseException]) -> None:
    """On the loop's thread: a task that ended meanwhile is left alone."""
    if not task.done():
        _interrupts[task] = exc_class
        task.cancel(exc_class.__name__)
