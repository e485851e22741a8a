"""Fixture workflows (imported by ``tests/jobs.py``, so that workers find them)."""

import os
import time
from datetime import timedelta
from pathlib import Path

from django_jobs import patched, sleep, step, step_key, wait_for, workflow
from django_jobs.exceptions import EventTimeout

# How many times each plain step ran in this process, by (workflow tag, step): the replay
# tests read it.
CALLS: dict[tuple[str, str], int] = {}


def _hold(marker_dir: str, name: str, seconds: float = 60.0) -> None:
    """The first time only (its marker file is missing): write the marker and block, for a
    test to kill the process here."""
    if not marker_dir:
        return
    marker = Path(marker_dir) / name
    if not marker.exists():
        marker.write_text(str(os.getpid()))
        time.sleep(seconds)


def write_row(tag: str, n: int, marker_dir: str = "", hold_inside: int = -1) -> int:
    """An atomic step's write: one ``Execution`` row per step (``attempt`` holds the step)."""
    from tests.models import Execution

    Execution.objects.create(job_public_id=tag, pid=os.getpid(), attempt=n)
    if n == hold_inside:
        _hold(marker_dir, f"inside-{n}")
    return n + 1


@workflow("wf_five")
def five_steps(tag: str, marker_dir: str = "", hold_after: int = -1,
               hold_inside: int = -1, hold_seconds: float = 60.0) -> dict:
    """Five atomic steps, each writing a row; holds after step ``hold_after`` (a step
    boundary) or inside step ``hold_inside``'s transaction, the first time."""
    total = 0
    for n in range(5):
        total += step("write", write_row, tag, n, marker_dir, hold_inside)
        if n == hold_after:
            _hold(marker_dir, f"after-{n}", hold_seconds)
    return {"total": total}


def counted(tag: str, name: str, value: object) -> object:
    CALLS[(tag, name)] = CALLS.get((tag, name), 0) + 1
    return value


@workflow("wf_replay")
def replayed(tag: str, seconds: float = 0.0) -> list:
    """A plain step, a sleep, an atomic step: each run after the sleep replays the first."""
    first = step("fetch", counted, tag, "fetch", {"price": 7}, atomic=False)
    sleep(timedelta(seconds=seconds))
    second = step("store", counted, tag, "store", first["price"] * 2)
    return [first, second]


@step(atomic=False)
def remember(tag: str, n: int) -> int:
    return counted(tag, f"remember-{n}", n)  # type: ignore[return-value]


@workflow("wf_decorated")
def decorated(tag: str) -> int:
    return remember(tag, 1) + remember(tag, 2)


@workflow("wf_wait")
def waiting(tag: str, timeout: float = 60.0, marker_dir: str = "") -> dict:
    """A step, a short sleep, a wait for ``paid``: returns the event's payload, or
    ``{"timeout": True}`` when its timeout passes first."""
    step("reserve", counted, tag, "reserve", 1)
    sleep(timedelta(seconds=0.2))
    if marker_dir:
        (Path(marker_dir) / "waiting").write_text("1")
    try:
        paid = wait_for("paid", timeout=timedelta(seconds=timeout))
    except EventTimeout:
        return {"timeout": True}
    return {"paid": paid}


@workflow("wf_two_waits")
def two_waits() -> list:
    return [wait_for("ping"), wait_for("ping")]


@workflow("wf_loop")
def loop(steps: int) -> int:
    for n in range(steps):
        step("n", counted, "loop", "n", n)
    return steps


@workflow("wf_reads_outside")
def reads_outside() -> int:
    from django_jobs.models import Job

    return Job.objects.count() + step("one", counted, "outside", "one", 1)


@workflow("wf_keys")
def keys_of_steps() -> list:
    return [step("call", step_key, atomic=False), step("call", step_key, atomic=False)]


@workflow("wf_patched")
def with_marker(tag: str) -> list:
    """``first``, then ``check`` under the marker (the new code) or ``old`` (the old)."""
    done = [step("first", counted, tag, "first", "first")]
    if patched("check"):
        done.append(step("check", counted, tag, "check", "check"))
    else:
        done.append(step("old", counted, tag, "old", "old"))
    done.append(step("last", counted, tag, "last", "last"))
    return done
