"""What a workflow function calls: ``step``, ``sleep``, ``sleep_until`` and ``wait_for``.

A step that finished in an earlier run returns its stored result without running. An atomic
step runs in one transaction on the workflow's database alias that also writes its
checkpoint (fenced on the run's lease), so its ORM writes happen once; a plain step holds no
transaction and is checkpointed after it returns, so it runs at least once.

A sleep or a wait that is not over ends the run with ``Snooze``: the job is pending again,
no attempt spent, no worker slot held. The wake time and a wait's deadline are recorded, by
the database's clock, when the sleep or the wait is first met, so a replay does not push
them back.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, ParamSpec, TypeVar, overload

from django.db import transaction

from django_jobs.core import clock
from django_jobs.exceptions import EventTimeout, Snooze
from django_jobs.features.workflows.events import take_event
from django_jobs.features.workflows.history import WAITING_MARK, Run, running

logger = logging.getLogger("django_jobs.workflows")

P = ParamSpec("P")
R = TypeVar("R")

# Longest snooze a job takes; a longer sleep snoozes again when it wakes.
LONGEST_SNOOZE = 366 * 86400.0
# An atomic step longer than this is logged: its transaction holds back vacuum meanwhile.
LONG_TRANSACTION_SECONDS = 5.0


@overload
def step(name: str, fn: Callable[..., R], /, *args: Any, atomic: bool = True,
         **kwargs: Any) -> R: ...
@overload
def step(*, atomic: bool = True, name: str | None = None
         ) -> Callable[[Callable[P, R]], Callable[P, R]]: ...
def step(name: Any = None, fn: Any = None, /, *args: Any, atomic: bool = True,
         **kwargs: Any) -> Any:
    """``step("charge", charge_card, order_id)`` runs ``charge_card(order_id)`` as the
    workflow's next step, or returns its stored result when an earlier run finished it.
    ``@step(atomic=True)`` on a function makes each call of it such a step, named after the
    function. ``atomic`` (the default): the step and its checkpoint commit together; False: a
    plain step, for calls outside the database, checkpointed after it returns."""
    if fn is None and callable(name):  # ``@step`` without arguments
        return step(atomic=atomic)(name)
    if fn is None:
        def decorate(func: Callable[P, R]) -> Callable[P, R]:
            step_name = kwargs.pop("name", None) if name is None else name
            step_name = step_name or func.__name__

            @functools.wraps(func)
            def call(*a: P.args, **kw: P.kwargs) -> R:
                return run_step(step_name, func, a, kw, atomic=atomic)

            return call

        return decorate
    return run_step(name, fn, args, kwargs, atomic=atomic)


def run_step(name: str, fn: Callable[..., R], args: tuple[Any, ...], kwargs: dict[str, Any],
             *, atomic: bool) -> R:
    """Replay or run one step (see ``step``)."""
    if not isinstance(name, str) or not name or "#" in name or len(name) > 150:
        raise ValueError(f"a step's name is 1 to 150 characters without '#', not {name!r}")
    run = running()
    with run.inside():
        return _run_step(run, name, fn, args, kwargs, atomic=atomic)


def _run_step(run: Run, name: str, fn: Callable[..., R], args: tuple[Any, ...],
              kwargs: dict[str, Any], *, atomic: bool) -> R:
    kind = "atomic" if atomic else "plain"
    key, stored = run.take(name, kind)
    if stored is not None:
        return stored.result  # type: ignore[return-value]  # the JSON the step returned
    run.running_key = key
    try:
        if not atomic:
            result = fn(*args, **kwargs)
            run.checkpoint(key, kind, result)
            return result
        started = time.monotonic()
        with transaction.atomic(using=run.using):
            result = fn(*args, **kwargs)
            run.checkpoint(key, kind, result)
    finally:
        run.running_key = None
    took = time.monotonic() - started
    if took > LONG_TRANSACTION_SECONDS:
        logger.warning("atomic step %s of workflow %s held its transaction %.1f s: a long "
                       "transaction holds back vacuum; make it a plain step or split it",
                       key, run.job.public_id, took)
    return result


def patched(name: str) -> bool:
    """A version marker, for changing a workflow's code under workflows that are running:
    ``if patched("fraud-check"): <new steps>`` else ``<old steps>``. True for a workflow that
    reaches this place under the new code (the marker is recorded as a step); False for one
    whose history, written by the old code, holds another step here, so its replay goes on
    down the old path. Remove the old branch once no workflow started before it runs."""
    if not isinstance(name, str) or not name or "#" in name or len(name) > 150:
        raise ValueError(f"a marker's name is 1 to 150 characters without '#', not {name!r}")
    run = running()
    with run.inside():
        return run.patched(f"patch:{name}")


def step_key() -> str:
    """Inside a step: ``<workflow's public id>:<step key>``, the same on every run of that step,
    for an outside service's idempotency key (a plain step may run more than once)."""
    run = running()
    if run.running_key is None:
        raise RuntimeError("step_key() is called inside a step")
    return f"{run.job.public_id}:{run.running_key}"


def sleep(duration: timedelta) -> None:
    """Sleep ``duration`` from the moment the workflow first reaches this sleep, holding no
    worker: the run ends and the workflow runs again once the time has come."""
    if not isinstance(duration, timedelta):
        raise TypeError(f"sleep takes a timedelta, not {duration!r}")
    _sleep(lambda run: clock.now(run.using) + duration)


def sleep_until(when: datetime) -> None:
    """Sleep until ``when`` (by the database's clock), holding no worker."""
    if not isinstance(when, datetime):
        raise TypeError(f"sleep_until takes a datetime, not {when!r}")
    _sleep(lambda run: when)


def _sleep(wake: Callable[[Run], datetime]) -> None:
    run = running()
    with run.inside():
        key, stored = run.take("sleep", "sleep")
        if stored is None:
            stored = run.checkpoint(key, "sleep", until=wake(run))
        _park_until(run, stored.until)


def _park_until(run: Run, until: datetime | None) -> None:
    """End the run until ``until`` (None: until an event makes it due) unless it has come."""
    if until is None:
        raise Snooze(LONGEST_SNOOZE)
    left = (until - clock.now(run.using)).total_seconds()
    if left > 0:
        raise Snooze(min(left, LONGEST_SNOOZE))


def wait_for(name: str, timeout: timedelta | None = None) -> Any:
    """The payload of the next event ``name`` sent to this workflow (``send_event``), waiting
    for it without holding a worker; one sent before the wait began is taken at once.
    ``EventTimeout`` when ``timeout`` (from the moment the wait is first met) passes first:
    the event or the timeout, whichever commits first, decides, and a replay repeats it."""
    if timeout is not None and not isinstance(timeout, timedelta):
        raise TypeError(f"wait_for's timeout is a timedelta, not {timeout!r}")
    if not isinstance(name, str) or not 1 <= len(name) <= 100 or "#" in name:
        raise ValueError(f"an event's name is 1 to 100 characters without '#', not {name!r}")
    run = running()
    with run.inside():
        key, stored = run.take(f"wait:{name}", "wait")
        if stored is None:
            deadline = clock.now(run.using) + timeout if timeout is not None else None
            stored = run.checkpoint(key, "wait", until=deadline, done=False)
        while not stored.done and not take_event(run, stored, name):
            run.job.__dict__[WAITING_MARK] = name
            _park_until(run, stored.until)
    result = stored.result or {}
    if result.get("timeout"):
        raise EventTimeout(f"no event {name!r} came before {stored.until}")
    return result.get("payload")
