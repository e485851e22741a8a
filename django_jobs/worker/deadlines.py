"""What a worker holds for each running job, and how long a timed-out handler gets to stop
(the executor, ``worker/executor.py``, interrupts it at its timeout, then abandons it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from django_jobs.models import Job

# How long a handler interrupted at its timeout gets to stop before its thread is abandoned.
TIMEOUT_GRACE_SECONDS = 5.0


@dataclass(slots=True)
class Running:
    job: Job
    started: float
    deadline: float | None
    interrupted: bool = False
    abandoned: bool = False  # its timeout outcome is queued; never abandon it twice
