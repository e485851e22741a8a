"""``manage.py runworker``: parse the options, then hand over to ``django_jobs.worker``."""

from __future__ import annotations

import argparse
import logging
import re
import sys
from typing import Any

from django.core.checks import CheckMessage
from django.core.management.base import BaseCommand, CommandError
from django.db import connections

from django_jobs.checks.databases import database_checks, vendor_problems
from django_jobs.core.settings import jobs_settings
from django_jobs.core.validation import QUEUE_RE
from django_jobs.models.schema import NotMigrated, Unreachable, jobs_database, require_migrated
from django_jobs.worker.loop import Worker
from django_jobs.worker.options import PREFETCH_HORIZON_SECONDS, WorkerOptions
from django_jobs.worker.shutdown import exit_without_stray_threads
from django_jobs.worker.watchman import bound_network_waits

# Each slot is a thread with its own database connection, and the worker holds two more (the
# loop's, and on PostgreSQL the LISTEN connection): --concurrency + 2 in all. Past a few hundred
# threads one process gains nothing (they share one interpreter lock and one claim loop) and
# the connections alone exceed PostgreSQL's default max_connections (100) several times over:
# run more worker processes instead.
MAX_CONCURRENCY = 500

logger = logging.getLogger("django_jobs")


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def concurrency(text: str) -> int:
    value = positive_int(text)
    if value > MAX_CONCURRENCY:
        raise argparse.ArgumentTypeError(
            f"at most {MAX_CONCURRENCY}, not {value}: each slot is a thread with its own database "
            f"connection (a worker holds --concurrency + 2); run more workers instead"
        )
    return value


# Seconds options (intervals, timeouts, the lease) take 10 ms to a day: shorter would spin the
# loop or the database, longer is a mistake (or infinity, which the loop's waits cannot take).
MIN_SECONDS, MAX_SECONDS = 0.01, 86400.0


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not MIN_SECONDS <= value <= MAX_SECONDS:  # also refuses nan and inf
        raise argparse.ArgumentTypeError(
            f"must be from {MIN_SECONDS} to {MAX_SECONDS:.0f} seconds, not {text}"
        )
    return value


def zero_or_seconds(text: str) -> float:
    """0 (--prefetch: only the free slots; --burst-wait: no wait) or seconds, as the other
    seconds options."""
    try:
        if float(text) == 0:
            return 0.0
    except ValueError:
        pass
    return seconds(text)


def processes(text: str) -> int:
    """A number of worker processes, or ``auto`` (0 here: the CPUs the process may use)."""
    return 0 if text == "auto" else positive_int(text)


def queue_list(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    bad = [name for name in names if not QUEUE_RE.fullmatch(name)]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"bad queue name(s): {', '.join(bad) or text!r}")
    return names


def refuse_or_warn(problems: list[CheckMessage], *, warn: bool) -> None:
    """Raise one CommandError line for the errors among ``problems``; log the rest if
    ``warn``."""
    errors = [p for p in problems if p.is_serious()]
    if errors:
        raise CommandError("; ".join(
            f"{p.id}: {p.msg}" + (f" ({p.hint})" if p.hint else "") for p in errors))
    if warn:
        for problem in problems:
            logger.warning("%s: %s", problem.id, problem.msg)


class Command(BaseCommand):
    help = "Run a worker that claims and runs jobs until stopped (SIGTERM/SIGINT/SIGHUP drain it)."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--queues", type=queue_list, default=[],
                            help="comma-separated queues to serve (default: all queues)")
        parser.add_argument("--concurrency", type=concurrency, default=1,
                            help=f"jobs run at once in this process, each in a thread with its "
                            f"own database connection; 1 to {MAX_CONCURRENCY} (default: 1)")
        # Exclusive: a reload restarts a worker that --burst would have ended.
        ending = parser.add_mutually_exclusive_group()
        ending.add_argument("--burst", action="store_true",
                            help="exit when no job is ready and none is running (default: run "
                            "until stopped)")
        ending.add_argument("--reload", action="store_true",
                            help="restart the worker when the site's Python files change, as "
                            "runserver does, its running jobs handed back first; for "
                            "development (default: no restart)")
        parser.add_argument("--burst-wait", type=zero_or_seconds, default=0.0,
                            metavar="SECONDS",
                            help="with --burst: before exiting, wait for jobs due within this "
                            "many seconds (default: 0, exit when nothing is ready)")
        parser.add_argument("--max-jobs", type=positive_int, default=None,
                            help="exit after claiming this many jobs (default: no limit)")
        parser.add_argument("--poll-interval", type=seconds, default=None,
                            help="seconds an idle worker waits before looking again (default: "
                            f"POLL_INTERVAL, now {jobs_settings.POLL_INTERVAL})")
        parser.add_argument("--prefetch", type=zero_or_seconds, default=None,
                            help="claim, beyond the free slots, the jobs the threads are expected "
                            "to start within this many seconds, from recent job durations; 0: "
                            f"only the free slots (default: {PREFETCH_HORIZON_SECONDS})")
        parser.add_argument("--worker-id", default="",
                            help="name in logs and the admin (default: host-pid-random)")
        parser.add_argument("--shutdown-timeout", type=seconds, default=None,
                            help="seconds running jobs get to finish after SIGTERM (default: "
                            f"SHUTDOWN_TIMEOUT, now {jobs_settings.SHUTDOWN_TIMEOUT})")
        parser.add_argument("--lease", type=seconds, default=None,
                            help="seconds a claim holds without heartbeat (default: "
                            f"LEASE_SECONDS, now {jobs_settings.LEASE_SECONDS})")
        parser.add_argument("--heartbeat", type=seconds, default=None,
                            help="seconds between heartbeats and rescue passes (default: "
                            f"HEARTBEAT_SECONDS, now {jobs_settings.HEARTBEAT_SECONDS})")
        parser.add_argument("--processes", type=processes, default=1, metavar="N|auto",
                            help="worker processes, each with its own threads, run and "
                            "restarted by this one; auto: one per CPU this process may use "
                            "(default: 1, no supervisor)")
        parser.add_argument("--max-memory-per-process", type=positive_int, default=None,
                            metavar="MB",
                            help="a worker process whose memory (RSS) passes this takes no more "
                            "jobs, finishes its own and is replaced; past 1.5 times it is "
                            "killed (default: none; a single process too runs under a "
                            "supervisor then)")
        # A child of the supervisor: its end of the pipe (worker/supervised.py).
        parser.add_argument("--supervised-fd", type=int, default=None, help=argparse.SUPPRESS)

    def handle(self, *args: Any, **options: Any) -> None:
        # Django's flag for a run from manage.py (private, so absent from the stubs): a
        # process of its own, which the worker may end (threads must not hold it, and a
        # handler that outlives the shutdown timeout must not outlive the hand-back).
        own_process = bool(self._called_from_command_line)  # type: ignore[attr-defined]
        worker_options = worker_options_from(options, own_process)
        if options["processes"] != 1 or (options["max_memory_per_process"]
                                         and options["supervised_fd"] is None):
            from django_jobs.management.supervising import supervise  # only with --processes

            self._configure_logging(options["verbosity"])
            status = supervise(options, worker_options)
            if status:
                raise SystemExit(status)
            return
        bound_network_waits()
        self._configure_logging(options["verbosity"])
        check_database(jobs_database(), skip_checks=options["skip_checks"])
        worker = Worker(worker_options)
        if options["supervised_fd"] is not None:
            from django_jobs.management.supervising import supervised  # a supervisor's child

            supervised(worker, options)
        if options["reload"]:
            from django_jobs.management.reloading import ReloadingWorker  # only with --reload

            processed = ReloadingWorker(worker).run()
        else:
            processed = worker.run()
        if options["verbosity"] >= 1:
            self.stdout.write(f"worker finished: {processed} job(s) run")
        if own_process:
            exit_without_stray_threads()

    def _configure_logging(self, verbosity: int) -> None:
        """Print the worker's lines to stderr unless the site's LOGGING already routes them."""
        if logger.handlers or verbosity == 0:
            return
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG if verbosity >= 2 else logging.INFO)


def worker_options_from(options: dict[str, Any], own_process: bool) -> WorkerOptions:
    """The worker's options from the command's; CommandError for a combination it refuses."""
    worker_id = options["worker_id"]
    if options["burst_wait"] and not options["burst"]:
        raise CommandError("--burst-wait needs --burst")
    if worker_id and not re.match(r"^[\w.:@\-]{1,100}$", worker_id):
        raise CommandError(f"--worker-id {worker_id!r}: use letters, digits and ._:@-")
    kwargs = {
        "queues": options["queues"],
        "concurrency": options["concurrency"],
        "burst": options["burst"],
        "burst_wait": options["burst_wait"],
        "max_jobs": options["max_jobs"],
        "worker_id": worker_id,
    }
    for name, key in (("poll_interval", "poll_interval"), ("shutdown_timeout",
                      "shutdown_timeout"), ("lease_seconds", "lease"),
                      ("heartbeat_seconds", "heartbeat"), ("prefetch", "prefetch")):
        if options[key] is not None:
            kwargs[name] = options[key]
    worker_options = WorkerOptions(**kwargs, owns_process=own_process)
    if worker_options.lease_seconds <= worker_options.heartbeat_seconds:
        raise CommandError("--lease must be longer than --heartbeat")
    return worker_options


def check_database(using: str, *, skip_checks: bool) -> None:
    """Refuse a database django-jobs cannot use, or one not migrated; warn of the rest."""
    # The settings' checks (E020, W020) ran before handle() unless --skip-checks; they need
    # no connection, so a backend django-jobs cannot use is refused before one is opened.
    refuse_or_warn(vendor_problems(connections, [using]), warn=skip_checks)
    try:
        require_migrated(using)
    except Unreachable:
        pass  # an outage, not a mistake: the worker waits for the database and says so once
    except NotMigrated as exc:
        raise CommandError(str(exc)) from None
    else:  # the database-tagged checks, which a command's own checks leave out (E021)
        refuse_or_warn(database_checks(using), warn=True)
