"""Handler registration (``@handler("email_send")``) and discovery of every app's ``jobs.py``."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import ParamSpec, TypeVar

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import autodiscover_modules

from django_jobs.core.retry import Backoff, as_backoff
from django_jobs.exceptions import PermanentError
from django_jobs.handlers.handler_arguments import ArgumentSpec
from django_jobs.handlers.typed_handler import JobHandler

TYPE_RE = re.compile(r"^[A-Za-z0-9_.:\-]{1,100}$")

ExceptionTypes = tuple[type[BaseException], ...]
# A crash's policies: give the lost attempt back, or count it as a failed attempt.
ON_CRASH = ("retry", "fail")
# Where a handler's jobs run: None, a thread of the worker; "process", each in a child process
# of its own, which the worker can end (worker/process_isolation.py).
ISOLATION = ("process",)
# A handler: called with its arguments (the job's payload: ``handlers/handler_arguments.py``);
# returns its result (or an awaitable of it).
P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class Handler:
    """A registered handler and its job options; None means "use the settings"."""

    type: str
    func: Callable[..., object]
    max_attempts: int | None = None
    backoff: Backoff | Sequence[float] | None = None
    retry_on: ExceptionTypes | None = None
    permanent: ExceptionTypes = field(default=())
    timeout: float | None = None
    queue: str | None = None
    # A Unique rule (features/unique.py) and concurrency/rate limits (features/limits/)
    unique: object = None
    limits: tuple[object, ...] = ()
    # What a crash of the worker process running the job does to it (features/crashes.py):
    # "retry" gives the lost attempt back, "fail" counts it as a failed attempt. None: settings.
    on_crash: str | None = None
    max_crashes: int | None = None
    # How the payload becomes the function's arguments; None: called with the payload as stored
    # (the Tasks backend's handlers, whose payload holds their own args and kwargs).
    arguments: ArgumentSpec | None = None
    # None: the job runs in a thread of the worker; "process": in a child process of its own.
    isolation: str | None = None

    def is_permanent(self, exc: BaseException) -> bool:
        """True for errors not worth retrying: PermanentError, listed classes, or unlisted ones."""
        if isinstance(exc, (PermanentError, *self.permanent)):
            return True
        return self.retry_on is not None and not isinstance(exc, self.retry_on)

    def get_backoff(self) -> Backoff:
        return as_backoff(self.backoff)


_handlers: dict[str, Handler] = {}
# The handlers ``@handler`` registered, by type, read-only: an enqueue reads its own here
# first (a dict read) and asks ``get_handler`` only for a type not among them.
registered: Mapping[str, Handler] = MappingProxyType(_handlers)
# Resolvers for type prefixes (``"task:"`` for django.tasks) consulted when no handler matches.
_resolvers: dict[str, Callable[[str], Handler | None]] = {}


def handler(
    type: str,
    *,
    max_attempts: int | None = None,
    backoff: Backoff | Sequence[float] | None = None,
    retry_on: Sequence[type[BaseException]] | None = None,
    permanent: Sequence[type[BaseException]] = (),
    timeout: float | None = None,
    queue: str | None = None,
    unique: object = None,
    limits: Sequence[object] = (),
    on_crash: str | None = None,
    max_crashes: int | None = None,
    isolation: str | None = None,
) -> Callable[[Callable[P, R]], JobHandler[P, R]]:
    """Register ``func`` as the handler of jobs of ``type``; returns it as a ``JobHandler``,
    callable as the function and with typed verbs: ``func.enqueue(...)`` takes the function's
    own arguments (``handlers/typed_handler.py``). ``def func(payload)`` gets the payload as stored.

    ``on_crash`` and ``max_crashes`` say what happens to a job when the process running it dies
    (see docs/explanation-guarantees.md): "retry" (the default) gives the lost attempt back;
    "fail" counts it as a failed attempt. Either way a job that has crashed ``max_crashes``
    times, the last time alone in its worker, goes dead.

    ``isolation="process"`` runs each job in a child process of its own, which the worker ends
    if the handler is still running ``KILL_GRACE`` seconds after its timeout or a cancel
    (docs/howto-timeouts.md, "Hard stop")."""
    _check_handler_options(type, max_attempts, timeout, on_crash, max_crashes)
    if isolation is not None and isolation not in ISOLATION:
        raise ImproperlyConfigured(
            f"isolation for {type!r} must be None or one of {', '.join(ISOLATION)}")

    def register(func: Callable[P, R]) -> JobHandler[P, R]:
        spec = ArgumentSpec.of(func)
        existing = _handlers.get(type)
        if existing is not None and _qualname(existing.func) != _qualname(func):
            raise ImproperlyConfigured(
                f"job type {type!r} is registered twice: {_qualname(existing.func)} "
                f"and {_qualname(func)}"
            )
        _handlers[type] = Handler(
            type=type,
            func=func,
            max_attempts=max_attempts,
            backoff=as_backoff(backoff) if backoff is not None else None,
            retry_on=tuple(retry_on) if retry_on is not None else None,
            permanent=tuple(permanent),
            timeout=timeout,
            queue=queue,
            unique=unique,
            limits=tuple(limits),
            on_crash=on_crash,
            max_crashes=max_crashes,
            arguments=spec,
            isolation=isolation,
        )
        return JobHandler(type, func, spec)

    return register


def _check_handler_options(type: object, max_attempts: object, timeout: float | None,
                           on_crash: object, max_crashes: object) -> None:
    """ImproperlyConfigured naming the first of ``@handler``'s options that is wrong."""
    _check_type(type)
    for name, value in (("max_attempts", max_attempts), ("max_crashes", max_crashes)):
        if value is not None and (not isinstance(value, int) or value < 1):
            raise ImproperlyConfigured(f"{name} for {type!r} must be a positive integer")
    if timeout is not None and timeout <= 0:
        raise ImproperlyConfigured(f"timeout for {type!r} must be positive")
    if on_crash is not None and on_crash not in ON_CRASH:
        raise ImproperlyConfigured(f"on_crash for {type!r} must be one of {', '.join(ON_CRASH)}")


def _check_type(type: object) -> None:
    if not isinstance(type, str) or not TYPE_RE.fullmatch(type):
        raise ImproperlyConfigured(f"job type {type!r} must match {TYPE_RE.pattern}")


def register_resolver(prefix: str, resolve: Callable[[str], Handler | None]) -> None:
    """Let types starting with ``prefix`` be resolved on demand (used by the tasks backend)."""
    _resolvers[prefix] = resolve


def get_handler(type: str) -> Handler | None:
    """The handler of ``type``, or None (also for a type that is not even a string)."""
    if not isinstance(type, str):
        return None
    found = _handlers.get(type)
    if found is not None:
        return found
    for prefix, resolve in _resolvers.items():
        if type.startswith(prefix):
            return resolve(type)
    return None


def unregister(type: str) -> None:
    """Forget a handler (for tests that register throwaway types)."""
    _handlers.pop(type, None)


def registered_types() -> list[str]:
    """The job types registered with ``@handler``, sorted."""
    return sorted(_handlers)


def autodiscover() -> None:
    """Import ``jobs.py`` of every installed app so their handlers register."""
    autodiscover_modules("jobs")


def _qualname(func: Callable[..., object]) -> str:
    return f"{func.__module__}.{getattr(func, '__qualname__', repr(func))}"
