"""The retry policy: a pure decision from attempt number and error to "retry at" or "dead"."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol, cast

from django_jobs.core.settings import jobs_settings


class Backoff(Protocol):
    def delay(self, attempt: int, rand: Callable[[], float] = random.random) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""


@dataclass(frozen=True)
class ExponentialBackoff:
    """``base * 2**(attempt-1)`` seconds, at most ``cap``.

    With jitter the delay is drawn uniformly from [d/2, d] ("equal jitter"): retries of
    jobs that failed together spread out, yet never come back sooner than half the delay.
    """

    base: float = 10.0
    cap: float = 3600.0
    jitter: bool = True

    def __post_init__(self) -> None:
        if self.base < 0 or self.cap < 0:
            raise ValueError("backoff base and cap must not be negative")

    def delay(self, attempt: int, rand: Callable[[], float] = random.random) -> float:
        full = min(self.cap, self.base * 2 ** min(max(attempt - 1, 0), 62))
        return full / 2 + rand() * full / 2 if self.jitter else full


@dataclass(frozen=True)
class FixedSchedule:
    """Delays in seconds by attempt: ``FixedSchedule((10, 30, 120, 300))``; the last repeats."""

    delays: tuple[float, ...]

    def __post_init__(self) -> None:
        if not self.delays or any(d < 0 for d in self.delays):
            raise ValueError("a fixed schedule needs at least one delay, none negative")

    def delay(self, attempt: int, rand: Callable[[], float] = random.random) -> float:
        return float(self.delays[min(max(attempt, 1), len(self.delays)) - 1])


def as_backoff(value: Backoff | Sequence[float] | None) -> Backoff:
    """A handler's ``backoff=`` argument (or None for the settings) as a Backoff."""
    if value is None:
        schedule = jobs_settings.BACKOFF_SCHEDULE
        if schedule:
            return FixedSchedule(tuple(schedule))
        return ExponentialBackoff(
            base=float(jobs_settings.BACKOFF_BASE),
            cap=float(jobs_settings.BACKOFF_CAP),
            jitter=bool(jobs_settings.BACKOFF_JITTER),
        )
    if isinstance(value, list | tuple):
        return FixedSchedule(tuple(value))
    return cast(Backoff, value)  # neither None nor a list or tuple: a Backoff


@dataclass(frozen=True)
class Decision:
    """What happens after a failed attempt: ``retry_at`` set means retry, None means dead."""

    retry_at: datetime | None

    @property
    def dead(self) -> bool:
        return self.retry_at is None


def decide(
    *, attempt: int, max_attempts: int, permanent: bool, backoff: Backoff, now: datetime
) -> Decision:
    """Retry after the backoff while attempts remain and the error is not permanent."""
    if permanent or attempt >= max_attempts:
        return Decision(retry_at=None)
    return Decision(retry_at=now + timedelta(seconds=backoff.delay(attempt)))
