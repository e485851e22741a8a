"""What ``@handler`` returns: the function, still callable as it was, with verbs that enqueue a
job of its type from its own arguments, typed for the type checker.

``send_email.enqueue(order_id=1)`` takes exactly the handler's parameters (``ParamSpec``: mypy
refuses ``send_email.enqueue(order_id="x")``); the job's options go apart, before the
arguments, the shape of Django's ``@task``: ``send_email.using(priority=5).enqueue(order_id=1)``.
The arguments are checked in the caller (``handlers/handler_arguments.py``) and stored as the job's
JSON payload through ``Job.enqueue`` and its siblings, so the row is the one ``Job.enqueue``
writes.

The models sit above this layer: the verbs find ``Job`` through Django's app registry when
called, not by importing it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from difflib import get_close_matches
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar, Unpack

from django_jobs.core.contract import EnqueueKeywords
from django_jobs.exceptions import InvalidJob
from django_jobs.handlers.handler_arguments import ArgumentSpec

if TYPE_CHECKING:
    from django_jobs.models import Job

P = ParamSpec("P")
R = TypeVar("R", covariant=True)


def _jobs() -> type[Job]:
    from django.apps import apps

    return apps.get_model("django_jobs", "Job")


class Arguments(Generic[P]):
    """One call's arguments, checked and made the job's payload: an item of ``enqueue_many``
    (``send_email.bind(order_id=1)``)."""

    __slots__ = ("payload",)

    def __init__(self, payload: Any) -> None:
        self.payload = payload

    def __repr__(self) -> str:
        return f"Arguments({self.payload!r})"


class JobHandler(Generic[P, R]):
    """A registered handler of jobs of ``type``; calling it calls the function."""

    def __init__(self, type: str, func: Callable[P, R], spec: ArgumentSpec,
                 options: EnqueueKeywords | None = None) -> None:
        self.type = type
        self.func = func
        self.spec = spec
        self.options: EnqueueKeywords = {**(options or {})}
        functools.update_wrapper(self, func)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.func(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<JobHandler {self.type!r} {self.spec.name}>"

    def using(self, **options: Unpack[EnqueueKeywords]) -> JobHandler[P, R]:
        """The same handler whose verbs enqueue with these options (those of ``Job.enqueue``)
        on top of the ones this one has; options left None keep their value. TypeError for
        an unknown option, naming the nearest one, or the handler's argument it may be."""
        unknown = sorted(set(options) - EnqueueKeywords.__optional_keys__)
        if unknown:
            raise TypeError(unknown_option(self.spec, unknown[0]))
        given = {name: value for name, value in options.items() if value is not None}
        return JobHandler(self.type, self.func, self.spec,
                          {**self.options, **given})  # type: ignore[arg-type]  # EnqueueKeywords' own

    def bind(self, *args: P.args, **kwargs: P.kwargs) -> Arguments[P]:
        """These arguments checked and made a payload, for ``enqueue_many``; InvalidJob naming
        the argument that is missing or wrong."""
        return Arguments(self.spec.payload(args, kwargs))

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> Job:
        """Check the arguments and record a job of this handler's type with them as its payload,
        in the caller's transaction (``Job.enqueue``). InvalidJob naming a missing or wrong
        argument, before anything is written."""
        return _jobs().enqueue(self.type, self.spec.payload(args, kwargs), **self.options)

    def enqueue_many(self, calls: Iterable[Arguments[P] | Mapping[str, Any]]) -> list[Job]:
        """One job per item, in one statement (``Job.enqueue_many``): each item is
        ``handler.bind(...)`` or a mapping of keyword arguments. Every item is checked
        before anything is written."""
        return _jobs().enqueue_many(self.type, self._payloads(calls), **self.options)

    async def aenqueue(self, *args: P.args, **kwargs: P.kwargs) -> Job:
        """``enqueue`` from async code: the arguments are checked here, in the caller; the write
        is ``Job.aenqueue``'s."""
        payload = self.spec.payload(args, kwargs)
        return await _jobs().aenqueue(self.type, payload, **self.options)

    async def aenqueue_many(self, calls: Iterable[Arguments[P] | Mapping[str, Any]]
                            ) -> list[Job]:
        """``enqueue_many`` from async code, as ``aenqueue``."""
        payloads = self._payloads(calls)
        return await _jobs().aenqueue_many(self.type, payloads, **self.options)

    def _payloads(self, calls: Iterable[Arguments[P] | Mapping[str, Any]]) -> list[Any]:
        """Each item's payload; InvalidJob naming the item by its index (``[2].order_id``)."""
        payloads = []
        for index, call in enumerate(calls):
            if isinstance(call, Arguments):
                payloads.append(call.payload)
                continue
            try:
                payloads.append(self.spec.payload((), call))
            except InvalidJob as exc:
                raise InvalidJob({f"[{index}].{name}": messages
                                  for name, messages in exc.message_dict.items()}) from None
        return payloads


def unknown_option(spec: ArgumentSpec, name: str) -> str:
    """The message for an option ``.using()`` does not know."""
    if name in spec.signature.parameters:
        return (f"{spec.name}.using() takes job options, and {name!r} is an argument of "
                f"{spec.name}: give it to .enqueue({name}=...)")
    known = sorted(EnqueueKeywords.__optional_keys__)
    close = get_close_matches(name, known, n=1)
    hint = f"did you mean {close[0]!r}" if close else f"the options are {', '.join(known)}"
    return f"{spec.name}.using() got an unknown option {name!r} ({hint})"
