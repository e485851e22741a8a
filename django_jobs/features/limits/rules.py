"""The limits a handler declares, and the names and key values the claim counts them under.

    @handler("provider_call", limits=[ConcurrencyLimit(5), RateLimit(100, per=60)])
    @handler("tenant_sync", limits=[ConcurrencyLimit(1, key="tenant_id")])

``claim.claim_limited`` runs inside the claim transaction: it locks one row per (limit, key
value) in ``LimitLock`` (sorted, so claimers never deadlock), counts the jobs running or the
starts in the period under that lock, and claims only what fits.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, cast

from django.core.exceptions import ImproperlyConfigured

if TYPE_CHECKING:
    from django_jobs.core.json_rules import JSONValue

MISSING = "<missing>"
HASHED = "sha256:"


def value_of(payload: JSONValue, key: str | None) -> str:
    """The limit's key value for a payload, as a JSON string ("" for a per-type limit)."""
    if key is None:
        return ""
    if not isinstance(payload, dict) or key not in payload:
        return MISSING
    text = json.dumps(payload[key], sort_keys=True, default=str)
    if len(text) > 100:  # keeps scope names and LimitStart.value short
        return HASHED + hashlib.sha256(text.encode()).hexdigest()
    return text


@dataclass(frozen=True)
class ConcurrencyLimit:
    """At most ``limit`` jobs of the type running at once, or per value of ``payload[key]``."""

    limit: int
    key: str | None = None

    kind = "concurrency"

    def __post_init__(self) -> None:
        _check(self.limit, self.key)

    def name(self, type: str) -> str:
        return f"c:{type}:{self.key or ''}:{self.limit}"


@dataclass(frozen=True)
class RateLimit:
    """At most ``limit`` starts of the type (or per value of ``payload[key]``) in any window of
    ``per`` (seconds or a timedelta), counted over a sliding window of recorded starts."""

    limit: int
    per: float | timedelta = 1.0
    key: str | None = None

    kind = "rate"

    def __post_init__(self) -> None:
        _check(self.limit, self.key)
        if self.period.total_seconds() <= 0:
            raise ImproperlyConfigured("RateLimit per= must be positive")

    @property
    def period(self) -> timedelta:
        return self.per if isinstance(self.per, timedelta) else timedelta(seconds=self.per)

    def name(self, type: str) -> str:
        return f"r:{type}:{self.key or ''}:{self.limit}/{self.period.total_seconds():g}"


Limit = ConcurrencyLimit | RateLimit


def scope(name: str, value: str) -> str:
    """The LimitLock row of one (limit, key value); long ones hashed to fit 255 characters."""
    text = f"{name}={value}"
    if len(text) > 255:
        text = f"{name[:150]}={HASHED}{hashlib.sha256(text.encode()).hexdigest()}"
    return text


def _check(limit: object, key: object) -> None:
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise ImproperlyConfigured(f"a limit must be a positive integer, not {limit!r}")
    if key is not None and (not isinstance(key, str) or not key):
        raise ImproperlyConfigured(f"a limit key must be a payload field name, not {key!r}")


def limited_types() -> dict[str, tuple[Limit, ...]]:
    """Registered types that have limits; empty (and no query made) when none do."""
    from django_jobs.handlers.registry import _handlers

    # The registry (core) holds them untyped: it cannot name this feature's classes.
    return {t: cast("tuple[Limit, ...]", h.limits) for t, h in _handlers.items() if h.limits}
