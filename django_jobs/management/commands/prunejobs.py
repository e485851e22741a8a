"""``manage.py prunejobs``: delete finished jobs older than their status's retention age."""

from __future__ import annotations

import argparse
import re
from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from django_jobs.features.retention import (
    PRUNABLE,
    configured_ages,
    kept_for_dependents,
    prune,
    stats_age,
)
from django_jobs.models.schema import NotMigrated, require_migrated

AGE_RE = re.compile(r"^(\d+(?:\.\d+)?)([smhdw]?)$")
UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def age(text: str) -> timedelta | None:
    """``30d``, ``12h``, ``90m``, ``45s``, plain seconds, or ``never``."""
    if text.strip().lower() == "never":
        return None
    match = AGE_RE.match(text.strip().lower())
    if not match:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an age: use a number with s, m, h, d or w (7d, 12h), or never"
        )
    return timedelta(seconds=float(match[1]) * UNITS[match[2]])


def positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text!r}")
    return int(text)


class Command(BaseCommand):
    help = "Delete completed, canceled and dead jobs older than their retention age."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        for status in PRUNABLE:
            parser.add_argument(f"--{status}", type=age, default=argparse.SUPPRESS,
                                help=f"age past which {status} jobs go (7d, 12h, never); "
                                "default: DJANGO_JOBS['RETENTION']")
        parser.add_argument("--batch-size", type=positive_int, default=None,
                            help="jobs deleted per transaction (default: PRUNE_BATCH_SIZE)")
        parser.add_argument("--dry-run", action="store_true",
                            help="count what would be deleted, delete nothing")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            ages = configured_ages()
            stats_age()  # checked before any deletes
            require_migrated()
        except (ValueError, NotMigrated) as exc:
            raise CommandError(str(exc)) from None
        for status in PRUNABLE:
            if status in options:
                ages[status] = options[status]
        counts = prune(ages, batch_size=options["batch_size"], dry_run=options["dry_run"])
        verb = "would delete" if options["dry_run"] else "deleted"
        for status in PRUNABLE:
            status_age = ages[status]
            if status_age is None:
                self.stdout.write(f"{status}: kept (no age)")
            else:
                kept = kept_for_dependents(status, status_age)
                who = "an unfinished job" if status == "completed" else "a waiting job"
                waited = f"; kept {kept} {who} depends on" if kept else ""
                self.stdout.write(
                    f"{status}: {verb} {counts[status]} older than {status_age}{waited}")
