"""``manage.py runworker``: parse the options, then hand over to ``django_jobs.worker``."""

from __future__ import annotations

import argparse
import logging
import re
import sys

from django.core.management.base import BaseCommand, CommandError

from django_jobs.exiting import exit_without_stray_threads
from django_jobs.validation import QUEUE_RE
from django_jobs.worker import Worker, WorkerOptions


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, not {text}")
    return value


def queue_list(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    bad = [name for name in names if not QUEUE_RE.match(name)]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"bad queue name(s): {', '.join(bad) or text!r}")
    return names


class Command(BaseCommand):
    help = "Run a worker that claims and runs jobs until stopped (SIGTERM/SIGINT/SIGHUP drain it)."

    def create_parser(self, prog_name: str, subcommand: str, **kwargs):  # type: ignore[no-untyped-def]
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        # argparse errors become CommandError (exit status 1 with a clear message).
        parser.called_from_command_line = False
        return parser

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--queues", type=queue_list, default=[],
                            help="comma-separated queues to serve (default: all)")
        parser.add_argument("--concurrency", type=positive_int, default=1,
                            help="jobs run at once in this process (threads)")
        parser.add_argument("--burst", action="store_true",
                            help="exit when no job is ready and none is running")
        parser.add_argument("--max-jobs", type=positive_int, default=None,
                            help="exit after claiming this many jobs")
        parser.add_argument("--poll-interval", type=positive_float, default=None,
                            help="seconds an idle worker waits before looking again")
        parser.add_argument("--worker-id", default="",
                            help="name in logs and the admin (default: host-pid-random)")
        parser.add_argument("--shutdown-timeout", type=positive_float, default=None,
                            help="seconds running jobs get to finish after SIGTERM")
        parser.add_argument("--lease", type=positive_float, default=None,
                            help="seconds a claim holds without heartbeat")
        parser.add_argument("--heartbeat", type=positive_float, default=None,
                            help="seconds between heartbeats and rescue passes")

    def handle(self, *args, **options) -> None:  # type: ignore[no-untyped-def]
        worker_id = options["worker_id"]
        if worker_id and not re.match(r"^[\w.:@\-]{1,100}$", worker_id):
            raise CommandError(f"--worker-id {worker_id!r}: use letters, digits and ._:@-")
        kwargs = {
            "queues": options["queues"],
            "concurrency": options["concurrency"],
            "burst": options["burst"],
            "max_jobs": options["max_jobs"],
            "worker_id": worker_id,
        }
        for name, key in (("poll_interval", "poll_interval"), ("shutdown_timeout",
                          "shutdown_timeout"), ("lease_seconds", "lease"),
                          ("heartbeat_seconds", "heartbeat")):
            if options[key] is not None:
                kwargs[name] = options[key]
        worker_options = WorkerOptions(**kwargs)
        if worker_options.lease_seconds <= worker_options.heartbeat_seconds:
            raise CommandError("--lease must be longer than --heartbeat")
        self._configure_logging(options["verbosity"])
        processed = Worker(worker_options).run()
        if options["verbosity"] >= 1:
            self.stdout.write(f"worker finished: {processed} job(s) run")
        if self._called_from_command_line:  # a process of its own: threads must not hold it
            exit_without_stray_threads()

    def _configure_logging(self, verbosity: int) -> None:
        """Print the worker's lines to stderr unless the site's LOGGING already routes them."""
        logger = logging.getLogger("django_jobs")
        if logger.handlers or verbosity == 0:
            return
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG if verbosity >= 3 else logging.INFO)
