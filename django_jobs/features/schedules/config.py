"""Recurring schedules, read into checked ``ScheduleSpec`` objects: the ``SCHEDULES`` setting
and the handlers declared with ``@periodic``.

    DJANGO_JOBS = {"SCHEDULES": {
        "nightly-report": {"type": "report", "cron": "0 3 * * *", "timezone": "Europe/Paris"},
        "sync": {"type": "sync", "every": 900, "queue": "sync", "misfire": "skip"},
    }}

    @periodic(cron="0 3 * * *", timezone="Europe/Paris")
    @handler("report")
    def report(payload): ...

A declared schedule takes the same options as a setting's (its type is the handler's; its name,
the type unless given) and follows the same rules; a name used twice is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone as tz

from django_jobs.core.settings import jobs_settings

if TYPE_CHECKING:
    from django_jobs.core.json_rules import JSONValue

MISFIRE_POLICIES = ("coalesce", "all", "skip")
KEYS = {"type", "payload", "queue", "priority", "max_attempts", "cron", "timezone", "every",
        "misfire", "grace", "max_catchup"}
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MAX_LOOKBACK = timedelta(days=400)


@dataclass(frozen=True)
class ScheduleSpec:
    name: str
    type: str
    payload: JSONValue = field(default_factory=dict)
    queue: str | None = None
    priority: str | int = "normal"
    max_attempts: int | None = None
    cron: str | None = None
    timezone: str = "UTC"
    every: timedelta | None = None
    # What a worker does with occurrences it finds more than ``grace`` late (after downtime):
    # coalesce = run one job now for all of them; all = one job for each (at most
    # max_catchup, the latest); skip = none, wait for the next occurrence.
    misfire: str = "coalesce"
    grace: timedelta = timedelta(seconds=60)
    max_catchup: int = 100
    # Where it is declared: "settings" (SCHEDULES), or "@periodic" on its handler.
    declared_in: str = "settings"

    def after(self, moment: datetime) -> Iterator[datetime]:
        """Occurrences strictly after ``moment``, in order: in UTC, or naive in the default
        time zone after a naive ``moment`` (``USE_TZ = False``, as Django reads times then)."""
        if tz.is_aware(moment):
            yield from self._after(moment)
            return
        zone = tz.get_default_timezone()
        for occurrence in self._after(tz.make_aware(moment, zone)):
            yield tz.make_naive(occurrence, zone)

    def _after(self, moment: datetime) -> Iterator[datetime]:
        if self.every is not None:
            step = self.every
            k = (moment - EPOCH) // step + 1
            while True:
                yield EPOCH + k * step
                k += 1
        else:
            assert self.cron is not None  # noqa: S101 (narrows the type: a schedule has every or cron)
            local = moment.astimezone(ZoneInfo(self.timezone))
            for occurrence in CronSim(self.cron, local):
                yield occurrence.astimezone(UTC)

    def next_after(self, moment: datetime) -> datetime:
        return next(self.after(moment))

    def due(self, since: datetime, now: datetime) -> list[datetime]:
        """Occurrences in (since, now], the latest ``max_catchup`` of them at most (and none
        from more than ``MAX_LOOKBACK`` ago, to bound the work after a very long downtime)."""
        found: list[datetime] = []
        for occurrence in self.after(max(since, now - MAX_LOOKBACK)):
            if occurrence > now:
                break
            found.append(occurrence)
            if len(found) > self.max_catchup:
                found.pop(0)
        return found

    def to_enqueue(self, due: list[datetime], now: datetime) -> list[datetime]:
        """Which due occurrences get a job, by the misfire policy."""
        on_time = [o for o in due if now - o <= self.grace]
        late = [o for o in due if now - o > self.grace]
        if not late or self.misfire == "all":
            return due
        if self.misfire == "skip":
            return on_time
        return on_time or late[-1:]  # coalesce: the latest stands for all that were missed


def schedules() -> dict[str, ScheduleSpec]:
    """All schedules, the setting's and the handlers' (``@periodic``); raises
    ImproperlyConfigured naming the bad one, or a name declared twice."""
    from django_jobs.handlers import registry

    setting = jobs_settings.SCHEDULES or {}
    if not isinstance(setting, dict):
        raise ImproperlyConfigured("DJANGO_JOBS['SCHEDULES'] must be a dict of name to options")
    found = {name: parse(name, options) for name, options in setting.items()}
    for handler in registry.registered.values():
        spec = handler.periodic
        if not isinstance(spec, ScheduleSpec):
            continue
        if spec.name in found:
            other = ("in SCHEDULES" if found[spec.name].declared_in == "settings"
                     else "by another @periodic")
            raise ImproperlyConfigured(
                f"schedule {spec.name!r} is declared twice: by @periodic on {handler.type!r} "
                f"and {other}; give @periodic a name= of its own")
        found[spec.name] = spec
    return found


def periodic(*, name: str | None = None, **options: Any) -> Callable[[Any], Any]:
    """Declare a recurring schedule on a handler: ``@periodic(...)`` above ``@handler(...)``,
    with the options of a ``SCHEDULES`` entry but its type (``cron`` and ``timezone``, or
    ``every``; ``payload``, ``queue``, ``priority``, ``max_attempts``, ``misfire``, ``grace``,
    ``max_catchup``). ImproperlyConfigured, at import, for a bad option or a misplaced
    decorator."""
    from django_jobs.handlers import registry

    def declare(job_handler: Any) -> Any:
        type = getattr(job_handler, "type", None)
        if not isinstance(type, str) or registry.get_handler(type) is None:
            raise ImproperlyConfigured(
                "@periodic goes above @handler(...): it declares a schedule for a handler")
        if "type" in options:
            raise ImproperlyConfigured(f"@periodic on {type!r}: the type is the handler's")
        spec = parse(name or type, {**options, "type": type},
                     where=f"@periodic on {type!r}")
        registry.amend(type, periodic=replace(spec, declared_in="@periodic"))
        return job_handler

    return declare


def parse(name: str, options: object, *, where: str = "") -> ScheduleSpec:
    def bad(message: str) -> ImproperlyConfigured:
        place = where or f"DJANGO_JOBS['SCHEDULES'][{name!r}]"
        return ImproperlyConfigured(f"{place}: {message}")

    checked = _known_options(name, options, bad)
    values = {k: v for k, v in checked.items() if k in KEYS - {"every", "grace"}}
    values.update(_timing(checked, bad))
    _check_policies(checked, bad)
    return ScheduleSpec(name=name, **values)


def _known_options(name: object, options: object,
                   bad: Callable[[str], ImproperlyConfigured]) -> dict[str, Any]:
    """The options as a dict of known keys with a job type, under a name of 1 to 100
    characters."""
    if not isinstance(name, str) or not 0 < len(name) <= 100:
        raise bad("the name must be a string of 1 to 100 characters")
    if not isinstance(options, dict):
        raise bad("must be a dict of options")
    unknown = set(options) - KEYS
    if unknown:
        raise bad(f"unknown option(s) {', '.join(sorted(unknown))}")
    if not isinstance(options.get("type"), str):
        raise bad("needs a job 'type'")
    return options


def _timing(options: dict[str, Any],
            bad: Callable[[str], ImproperlyConfigured]) -> dict[str, timedelta]:
    """``every`` and ``grace`` as timedeltas, once the schedule is checked to have exactly
    one of ``cron`` and ``every`` (a timezone for ``cron`` only)."""
    cron, every = options.get("cron"), options.get("every")
    if (cron is None) == (every is None):
        raise bad("give exactly one of 'cron' (an expression) and 'every' (seconds)")
    timing = {}
    if cron is not None:
        _check_cron(cron, options, bad)
    else:
        timing["every"] = _seconds(every, "every", bad, minimum=1)
        if "timezone" in options:
            raise bad("'timezone' applies to 'cron' schedules only")
    if "grace" in options:
        timing["grace"] = _seconds(options["grace"], "grace", bad, minimum=0)
    return timing


def _check_cron(cron: object, options: dict[str, Any],
                bad: Callable[[str], ImproperlyConfigured]) -> None:
    """A cron expression of five fields that cronsim reads, in a timezone that exists."""
    if not isinstance(cron, str) or len(cron.split()) != 5:
        raise bad(f"cron {cron!r} must have five fields: minute hour day month weekday")
    try:
        tz = ZoneInfo(options.get("timezone", "UTC"))
        CronSim(cron, datetime.now(tz))
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise bad(f"unknown timezone {options.get('timezone')!r}") from exc
    except CronSimError as exc:
        raise bad(f"cron {cron!r}: {exc}") from None


def _check_policies(options: dict[str, Any],
                    bad: Callable[[str], ImproperlyConfigured]) -> None:
    if options.get("misfire", "coalesce") not in MISFIRE_POLICIES:
        raise bad(f"misfire must be one of {', '.join(MISFIRE_POLICIES)}")
    catchup = options.get("max_catchup", 100)
    if not isinstance(catchup, int) or isinstance(catchup, bool) or catchup < 1:
        raise bad("max_catchup must be a positive integer")


def _seconds(value: object, key: str, bad: Callable[[str], ImproperlyConfigured],
             minimum: float) -> timedelta:
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if not isinstance(value, int | float) or isinstance(value, bool) or value < minimum:
        raise bad(f"{key} must be at least {minimum} seconds (a number or a timedelta)")
    return timedelta(seconds=value)
