"""System checks for a wrong setup of django-jobs."""

from __future__ import annotations

import logging
import sys
from difflib import get_close_matches
from types import FrameType
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register
from django.db import DEFAULT_DB_ALIAS

from django_jobs.core.settings import DEFAULTS, jobs_settings
from django_jobs.models.schema import jobs_database, problem

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from django.apps import AppConfig


@register()
def check_settings(app_configs: Sequence[AppConfig] | None = None, **kwargs: object) -> list:
    user = getattr(settings, "DJANGO_JOBS", {}) or {}
    if not isinstance(user, dict):
        return [Error("DJANGO_JOBS must be a dict", id="django_jobs.E001")]
    return [*check_unknown_keys(user), *check_limits(), *check_log_levels(),
            *check_timing(), *check_jobs_alias(), *check_read_replica(),
            *check_admin_refresh()]


def check_unknown_keys(user: dict) -> list:
    """A key that is no setting, with the nearest one (a misspelling) as the hint, else them
    all."""
    return [Error(f"DJANGO_JOBS has an unknown key {key!r}", id="django_jobs.E002",
                  hint=nearest_setting(key))
            for key in sorted(set(user) - set(DEFAULTS), key=str)]


def nearest_setting(key: object) -> str:
    close = get_close_matches(str(key).upper(), DEFAULTS, n=1, cutoff=0.6)
    if close:
        return f"did you mean {close[0]!r}?"
    return f"known keys: {', '.join(sorted(DEFAULTS))}"


def check_limits() -> list:
    """``MAX_ATTEMPTS``, the payload's and result's size limits, the clock skew warning."""
    problems = []
    max_attempts = jobs_settings.MAX_ATTEMPTS
    if not isinstance(max_attempts, int) or max_attempts < 1:
        problems.append(Error("DJANGO_JOBS['MAX_ATTEMPTS'] must be a positive integer",
                              id="django_jobs.E003"))
    for key in ("MAX_PAYLOAD_BYTES", "MAX_RESULT_BYTES"):
        limit = getattr(jobs_settings, key)
        if limit is not None and not _positive_int(limit):
            problems.append(Error(f"DJANGO_JOBS[{key!r}] must be a positive integer or None",
                                  id="django_jobs.E004"))
    if not _seconds_or_none(jobs_settings.CLOCK_SKEW_WARNING_SECONDS):
        problems.append(Error("DJANGO_JOBS['CLOCK_SKEW_WARNING_SECONDS'] must be a number of "
                              "seconds (0 or more) or None", id="django_jobs.E005"))
    return problems


def check_timing() -> list:
    """The horizon warning's and the kill grace's seconds, and a lease long enough for two
    heartbeats."""
    problems: list = []
    if not _seconds_or_none(jobs_settings.HORIZON_WARNING_SECONDS):
        problems.append(Error("DJANGO_JOBS['HORIZON_WARNING_SECONDS'] must be a number of "
                              "seconds (0 or more) or None", id="django_jobs.E007"))
    grace = jobs_settings.KILL_GRACE
    if not (_number(grace) and not grace < 0):
        problems.append(Error(f"DJANGO_JOBS['KILL_GRACE'] is {grace!r}, not a number of seconds "
                              "(0 or more)", id="django_jobs.E008"))
    lease, beat = jobs_settings.LEASE_SECONDS, jobs_settings.HEARTBEAT_SECONDS
    if lease < 2 * beat:
        problems.append(Warning(
            f"LEASE_SECONDS ({lease}) is less than twice HEARTBEAT_SECONDS ({beat}): a busy "
            "worker may lose its lease and see its jobs run twice",
            id="django_jobs.W001",
        ))
    return problems


def check_read_replica() -> list:
    """``READ_REPLICA``: None, or an alias of ``DATABASES``; its lag bound and fallback time:
    seconds."""
    problems = check_replica_alias()
    for key, may_be_none in (("READ_REPLICA_MAX_LAG_SECONDS", True),
                             ("READ_REPLICA_FALLBACK_SECONDS", False)):
        value = getattr(jobs_settings, key)
        if value is None and may_be_none:
            continue
        if not (_number(value) and value > 0):
            problems.append(Error(
                f"DJANGO_JOBS[{key!r}] is {value!r}, not a positive number of seconds"
                + (" or None" if may_be_none else ""), id="django_jobs.E041"))
    return problems


def check_admin_refresh() -> list:
    """``ADMIN_REFRESH_SECONDS``: seconds between the live pages' polls, 0 for none."""
    value = jobs_settings.ADMIN_REFRESH_SECONDS
    if _number(value) and value >= 0:
        return []
    return [Error(f"DJANGO_JOBS['ADMIN_REFRESH_SECONDS'] is {value!r}, not a number of seconds "
                  "(0 turns live refresh off)", id="django_jobs.E042")]


def check_replica_alias() -> list:
    replica = jobs_settings.READ_REPLICA
    if replica is None or (isinstance(replica, str) and replica in settings.DATABASES):
        return []
    known = ", ".join(repr(alias) for alias in settings.DATABASES)
    return [Error(
        f"DJANGO_JOBS['READ_REPLICA'] is {replica!r}, not an alias of DATABASES",
        id="django_jobs.E040",
        hint=f"name one of {known}, or None to read the jobs' database",
    )]


def _number(value: object) -> bool:
    """An int or a float, not a bool."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and not value < 1


def _seconds_or_none(value: object) -> bool:
    """None, or a number of seconds: 0 or more."""
    return value is None or (_number(value) and not value < 0)  # type: ignore[operator]


def check_log_levels() -> list:
    """``LOG_LEVELS``: a dict from the outcomes the worker reports to logging levels."""
    levels = jobs_settings.LOG_LEVELS
    known = DEFAULTS["LOG_LEVELS"]
    if not isinstance(levels, dict):
        return [Error("DJANGO_JOBS['LOG_LEVELS'] must be a dict", id="django_jobs.E006",
                      hint=f"for example {known!r}")]
    problems = []
    for outcome, level in levels.items():
        if outcome not in known:
            problems.append(Error(
                f"DJANGO_JOBS['LOG_LEVELS'] has an unknown outcome {outcome!r}",
                id="django_jobs.E006", hint=f"known outcomes: {', '.join(known)}"))
        elif not (isinstance(level, int) and not isinstance(level, bool)) and not (
                isinstance(level, str)
                and isinstance(logging.getLevelName(level.upper()), int)):
            problems.append(Error(
                f"DJANGO_JOBS['LOG_LEVELS'][{outcome!r}] is {level!r}, not a logging level",
                id="django_jobs.E006", hint="a level name (\"WARNING\", \"ERROR\") or number"))
    return problems


def check_jobs_alias() -> list:
    """Jobs routed off ``default``: ``transaction.atomic()`` (on ``default``) does not hold
    their writes."""
    using = jobs_database()
    if using == DEFAULT_DB_ALIAS:
        return []
    return [Warning(
        f"django-jobs writes jobs to database {using!r}, not 'default': a job enqueued inside "
        f"transaction.atomic() on another database is not part of that transaction (it commits "
        f"and stays if that transaction rolls back)",
        id="django_jobs.W003",
        hint=f"enqueue inside transaction.atomic(using={using!r}), or from "
             f"transaction.on_commit(), where a job must follow a transaction; then silence "
             f"this check (SILENCED_SYSTEM_CHECKS)",
    )]


@register(Tags.database)
def check_migrated(app_configs: Sequence[AppConfig] | None = None,
                   databases: Iterable[str] | None = None, **kwargs: object) -> list:
    """The jobs tables exist and are up to date (``check --database default``).

    Quiet while ``manage.py migrate`` runs: it runs the database checks just before it applies
    the very migrations this check asks for. A warning, not an error, so that it can never
    stop ``migrate`` either.
    """
    using = jobs_database()
    if not databases or using not in databases or migrate_is_running():
        return []
    found = problem(using)
    if found is None:
        return []
    return [Warning(found.reason, id="django_jobs.W002", hint=found.hint)]


def migrate_is_running() -> bool:
    """True when called from inside the ``migrate`` command (or a site's subclass of it): a
    method of it is on the stack, whether it runs the checks in ``execute`` (Django 5.2+) or
    in ``handle``, and however the command was started."""
    from django.core.management.commands.migrate import Command as Migrate

    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if isinstance(frame.f_locals.get("self"), Migrate):
            return True
        frame = frame.f_back
    return False
