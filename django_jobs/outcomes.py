"""What one attempt came to, as handed from the executor to the write path."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .models import Job


@dataclass(slots=True)
class AttemptOutcome:
    """The result of running one claimed job once.

    ``kind`` is ``completed``, ``failed``, ``canceled`` or ``snoozed`` (sched); for ``failed``,
    ``permanent`` says the error is not worth retrying. The retry decision is taken in the write
    path.
    """

    job: Job
    kind: str
    started_at: datetime
    finished_at: datetime
    result: Any = None
    error: dict[str, Any] | None = None
    permanent: bool = False
    cpu_time: float | None = None
    peak_memory: int | None = None
    snooze_seconds: float | None = None  # sched: kind "snoozed": run again after this delay
