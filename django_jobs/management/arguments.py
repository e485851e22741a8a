"""Argument types and output helpers shared by the operators' commands.

Each type turns one command-line word into a value or raises ``ArgumentTypeError``, so a bad
argument prints the command's usage and one line, as Django's own commands do.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from django.core.management.base import CommandError
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from django_jobs.core import clock
from django_jobs.core.outcomes import stored
from django_jobs.core.validation import QUEUE_RE
from django_jobs.models.jobs import PUBLIC_ID_PREFIX, Job
from django_jobs.models.schema import NotMigrated, require_migrated

JOB_ID_RE = re.compile(rf"^{PUBLIC_ID_PREFIX}[0-9a-f]{{20}}$")
AGE_RE = re.compile(r"^(\d{1,9}(?:\.\d{1,6})?)([smhdw])$")
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
MAX_LIMIT = 10_000


def job_id(text: str) -> str:
    """A job's public id, ``j-`` and 20 hex digits, as the admin and the API show it."""
    if not JOB_ID_RE.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a job id (j- and 20 hex digits)")
    return text


def names_from(text: str, allowed: Sequence[str], noun: str) -> list[str]:
    """A comma-separated list of names, each one of ``allowed`` (a ``noun`` each)."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    bad = [name for name in names if name not in allowed]
    if bad or not names:
        raise argparse.ArgumentTypeError(
            f"unknown {noun} {', '.join(bad) or text!r}: use {', '.join(allowed)}"
        )
    return names


def statuses(text: str) -> list[str]:
    return names_from(text, Job.Status.values, "status")


def ensure_migrated() -> None:
    """A CommandError with one line unless the jobs tables are there and current."""
    try:
        require_migrated()
    except NotMigrated as exc:
        raise CommandError(str(exc)) from None


def queue(text: str) -> str:
    if not QUEUE_RE.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a queue name ({QUEUE_RE.pattern})")
    return text


def job_type(text: str) -> str:
    if not 0 < len(text) <= 100 or not text.isprintable():
        raise argparse.ArgumentTypeError(f"{text!r} is not a job type")
    return text


def since(text: str) -> datetime:
    """An age (``90m``, ``12h``, ``7d``) counted back from now, or an ISO 8601 date and time."""
    match = AGE_RE.match(text.strip().lower())
    try:
        if match:
            return clock.now(Job.objects.db) - timedelta(seconds=float(match[1]) * UNITS[match[2]])
        moment = parse_datetime(text.strip())
        if moment is not None:
            if timezone.is_naive(moment):
                moment = timezone.make_aware(moment)
            return stored(moment.astimezone(UTC))  # the database compares in UTC
    except (ValueError, OverflowError):
        raise argparse.ArgumentTypeError(f"{text!r} is out of range") from None
    raise argparse.ArgumentTypeError(
        f"{text!r} is neither an age (90m, 12h, 7d) nor a date and time (2026-01-31T09:00)"
    )


def limit(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= MAX_LIMIT:
        raise argparse.ArgumentTypeError(f"must be an integer from 1 to {MAX_LIMIT}, not {text!r}")
    return int(text)


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    """Rows as left-aligned columns, the headers first."""
    cells = [[str(h) for h in headers], *[["-" if c is None else str(c) for c in r] for r in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
            for row in cells]


def common_options(parser: argparse.ArgumentParser) -> None:
    """Django's options for every command, accepted after a sub-action too
    (``manage.py jobs list --settings=mysite.settings``). Without a default of their own they
    leave the values the command's parser set."""
    quiet: dict[str, Any] = {"default": argparse.SUPPRESS, "help": argparse.SUPPRESS}
    parser.add_argument("-v", "--verbosity", type=int, choices=[0, 1, 2, 3], **quiet)
    for name in ("--settings", "--pythonpath"):
        parser.add_argument(name, **quiet)
    for name in ("--traceback", "--no-color", "--force-color", "--skip-checks"):
        parser.add_argument(name, action="store_true", **quiet)
