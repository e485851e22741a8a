"""A handler's own arguments as a job's payload: checked at enqueue, given back typed.

``@handler`` reads the function's signature once (``ArgumentSpec.of``). Its typed verbs
(``send_email.enqueue(order_id=1)``, ``handlers/typed_handler.py``) turn the call's arguments into
the JSON payload with ``payload``, raising InvalidJob naming the argument that is missing or
wrong; the worker turns the stored payload back into the call with ``call``.

The payload's shape follows the signature:

- one parameter, unannotated or of a payload type (``def f(payload)``, ``def f(payload:
  dict)``, ``def f(order: Order)`` for a dataclass, TypedDict or pydantic model): the payload
  is that argument, whole. This is every handler written for ``Job.enqueue("type", payload)``,
  which keeps receiving the payload as stored;
- any other signature (``def f(order_id: int)``, several parameters, keyword-only ones, none):
  the payload is a JSON object of the arguments given, by name, and the handler is called with
  them as keyword arguments.

Annotations are checked where they are plain (``int``, ``str``, ``float``, ``bool``, ``list``,
``tuple``, ``dict``, ``Optional`` and other unions, ``Literal``), a dataclass (by its fields), a
``TypedDict`` (its required and optional keys) or a pydantic model (its own validation, when
pydantic is installed). Anything else is held only to the payload's JSON rule. A dataclass, a
pydantic model and a tuple are stored as JSON and rebuilt for the handler. The checks per kind
of type are in ``handlers/argument_checks.py``, the JSON Schema they accept in
``handlers/argument_schema.py``, the reading of annotations in ``handlers/handler_annotations.py``.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable, Mapping, Sequence
from difflib import get_close_matches
from functools import cached_property
from typing import Any, get_args, get_origin, is_typeddict

from django.core.exceptions import ImproperlyConfigured

from django_jobs.core.contract import EnqueueKeywords
from django_jobs.core.json_rules import NotStorable, storable_json
from django_jobs.exceptions import InvalidJob, PermanentError
from django_jobs.handlers.argument_checks import convert
from django_jobs.handlers.argument_schema import json_schema, object_schema
from django_jobs.handlers.handler_annotations import (
    EMPTY,
    UNCHECKED,
    Wrong,
    pydantic_model,
    resolved_hints,
)

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


def _takes_payload_whole(func: Callable[..., object], param: inspect.Parameter) -> bool:
    """Whether a handler's only parameter is the payload itself: unannotated (``def
    f(payload)``), a JSON object (``dict``, ``Mapping``, ``Any``), or a payload type (a
    dataclass, a TypedDict, a pydantic model). A parameter of another type (``def f(order_id:
    int)``) is an argument by name, like those of a handler with several. An annotation that
    cannot be resolved yet (a class defined further down the module) names a payload type."""
    if param.annotation is EMPTY:
        return True
    annotation = resolved_hints(func).get(param.name, EMPTY)
    if annotation is EMPTY:  # unresolved
        return True
    if get_origin(annotation) is typing.Annotated:
        annotation = get_args(annotation)[0]
    base = get_origin(annotation) or annotation
    return (annotation in UNCHECKED or base in (dict, Mapping)
            or (isinstance(annotation, type) and dataclasses.is_dataclass(annotation))
            or is_typeddict(annotation) or pydantic_model(annotation) is not None)


def _given_twice(kwargs: Mapping[str, object], by_position: set[str]) -> dict[str, str]:
    return {name: "is given twice, by position and by name"
            for name in kwargs if name in by_position}


class ArgumentSpec:
    """How one handler's arguments become its job's payload, and the payload its arguments."""

    def __init__(self, func: Callable[..., object]) -> None:
        self.func = func
        self.name = getattr(func, "__qualname__", repr(func))
        try:
            self.signature = inspect.signature(func)
        except (TypeError, ValueError):  # a callable without one: it takes the payload
            self.signature = inspect.Signature(
                [inspect.Parameter("payload", inspect.Parameter.POSITIONAL_OR_KEYWORD)])
        params = list(self.signature.parameters.values())
        # The one parameter that takes the payload whole, or None: arguments by name.
        self.whole: str | None = None
        if len(params) == 1 and params[0].kind in _POSITIONAL and \
                _takes_payload_whole(func, params[0]):
            self.whole = params[0].name
        self.var_keyword: str | None = next(
            (p.name for p in params if p.kind is inspect.Parameter.VAR_KEYWORD), None)
        if self.whole is None:
            for p in params:
                if p.kind in (inspect.Parameter.POSITIONAL_ONLY,
                              inspect.Parameter.VAR_POSITIONAL):
                    raise ImproperlyConfigured(
                        f"handler {self.name}: its payload is its arguments by name, so "
                        f"parameter {p.name!r} cannot be positional-only or *args")

    @classmethod
    def of(cls, func: Callable[..., object]) -> ArgumentSpec:
        return cls(func)

    @cached_property
    def hints(self) -> dict[str, Any]:
        """The parameters' annotations, resolved on first use (a handler may name a class
        defined after it in its module)."""
        return resolved_hints(self.func)

    @cached_property
    def plain_whole(self) -> bool:
        """The payload is handed over as stored: one parameter, nothing to rebuild."""
        if self.whole is None:
            return False
        annotation = self.hints.get(self.whole, EMPTY)
        return annotation in UNCHECKED or annotation in (dict, list, str, int, bool) or \
            get_origin(annotation) in (dict, list)

    def payload_schema(self) -> dict[str, Any]:
        """The JSON Schema of a stored payload that fits the arguments (``check_stored``)."""
        if self.whole is not None:
            return json_schema(self._annotation(self.whole))
        params = [p for p in self.signature.parameters.values()
                  if p.kind is not inspect.Parameter.VAR_KEYWORD]
        extra = json_schema(self._annotation(self.var_keyword)) \
            if self.var_keyword is not None else False
        return object_schema({p.name: json_schema(self._annotation(p.name)) for p in params},
                             [p.name for p in params if p.default is EMPTY], extra)

    def _annotation(self, name: str) -> Any:
        if self.var_keyword is not None and name not in self.signature.parameters:
            return self.hints.get(self.var_keyword, EMPTY)
        return self.hints.get(name, EMPTY)

    # Enqueue: the caller's arguments to the payload.

    def payload(self, args: Sequence[object], kwargs: Mapping[str, object]) -> Any:
        """The JSON payload of a call with ``args`` and ``kwargs``; InvalidJob naming the
        argument that is missing, unknown or of the wrong type (nothing is written then)."""
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise InvalidJob(self._binding_problem(args, kwargs, exc)) from None
        given: dict[str, object] = {}
        for name, value in bound.arguments.items():
            if name == self.var_keyword:
                given.update(value)
            else:
                given[name] = value
        try:
            if self.whole is not None:
                value = given.get(self.whole)
                stored = convert(value, self._annotation(self.whole), self.whole, load=False)
                self._storable(self.whole, stored)
                return stored
            payload = {}
            for name, value in given.items():
                payload[name] = convert(value, self._annotation(name), name, load=False)
                self._storable(name, payload[name])
        except Wrong as wrong:
            raise InvalidJob({wrong.path: wrong.message}) from None
        return payload

    @staticmethod
    def _storable(name: str, value: object) -> None:
        try:
            storable_json(value)
        except NotStorable as exc:
            raise Wrong(name, str(exc)) from None

    def _binding_problem(self, args: Sequence[object], kwargs: Mapping[str, object],
                         exc: TypeError) -> dict[str, str]:
        positional = [p for p in self.signature.parameters.values() if p.kind in _POSITIONAL]
        if len(args) > len(positional):
            return {"arguments": f"{self.name} takes {len(positional)} positional "
                    f"argument(s), {len(args)} given"}
        by_position = {p.name for p in positional[:len(args)]}
        problems = {**self._unknown_names(kwargs), **_given_twice(kwargs, by_position),
                    **self._missing(kwargs, by_position)}
        return problems or {"arguments": str(exc)}

    def _unknown_names(self, kwargs: Mapping[str, object]) -> dict[str, str]:
        """The names given that are no argument (none is, with a ``**kwargs`` parameter), each
        with what was meant: ``.using()`` for a job option, else the nearest argument."""
        if self.var_keyword is not None:
            return {}
        params = self.signature.parameters
        return {name: f"is not an argument of {self.name}{_meant(name, params)}"
                for name in kwargs if name not in params}

    def _missing(self, kwargs: Mapping[str, object], by_position: set[str]) -> dict[str, str]:
        """The arguments without a default given neither by position nor by name."""
        return {p.name: "is required" for p in self.signature.parameters.values()
                if p.default is EMPTY and p.kind not in _VARIADIC
                and p.name not in kwargs and p.name not in by_position}

    # Run: the stored payload to the handler's call.

    def call(self, payload: Any) -> tuple[tuple[object, ...], dict[str, object]]:
        """The positional and keyword arguments the handler is called with for ``payload``;
        PermanentError if the stored payload does not fit them (running it again would not
        help: the job goes dead for a person to correct its payload)."""
        if self.plain_whole:
            return (payload,), {}
        try:
            return self._load(payload)
        except Wrong as wrong:
            raise PermanentError(f"the payload does not fit the arguments of {self.name}: "
                                 f"{wrong.path} {wrong.message}") from None

    def check_stored(self, payload: Any) -> None:
        """InvalidJob naming ``payload`` if a payload given whole (``Job.enqueue("type",
        payload)``, the API) does not fit the arguments: refused at enqueue, not at run."""
        if self.plain_whole:
            return
        try:
            self._load(payload)
        except Wrong as wrong:
            raise InvalidJob({"payload": f"does not fit the arguments of {self.name}: "
                              f"{wrong.path} {wrong.message}"}) from None

    def _load(self, payload: Any) -> tuple[tuple[object, ...], dict[str, object]]:
        if self.whole is not None:
            return (convert(payload, self._annotation(self.whole), self.whole, load=True),), {}
        return (), self._keywords(payload)

    def _keywords(self, payload: Any) -> dict[str, object]:
        if not isinstance(payload, dict):
            raise Wrong("payload", f"must be an object of arguments by name, not "
                        f"{type(payload).__name__}")
        params = self.signature.parameters
        for p in params.values():
            if p.default is EMPTY and p.kind is not inspect.Parameter.VAR_KEYWORD \
                    and p.name not in payload:
                raise Wrong(p.name, "is required")
        kwargs: dict[str, object] = {}
        for name, value in payload.items():
            if (name not in params or name == self.var_keyword) and self.var_keyword is None:
                raise Wrong(name, f"is not an argument of {self.name}")
            kwargs[name] = convert(value, self._annotation(name), name, load=True)
        return kwargs


def _meant(name: str, params: Mapping[str, inspect.Parameter]) -> str:
    """What an unknown argument ``name`` may have meant, in parentheses, or nothing."""
    if name in EnqueueKeywords.__optional_keys__:
        return f" (job options go in .using({name}=...))"
    named = [p for p, param in params.items() if param.kind not in _VARIADIC]
    close = get_close_matches(name, named, n=1)
    if close:
        return f" (did you mean {close[0]!r}?)"
    return f" (its arguments: {', '.join(named)})" if named else " (it takes none)"
