"""A handler's own arguments as a job's payload: checked at enqueue, given back typed.

``@handler`` reads the function's signature once (``ArgumentSpec.of``). Its typed verbs
(``send_email.enqueue(order_id=1)``, ``core/typed_handler.py``) turn the call's arguments into
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
pydantic model and a tuple are stored as JSON and rebuilt for the handler.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from functools import cached_property
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints, is_typeddict

from django.core.exceptions import ImproperlyConfigured

from django_jobs.core.json_rules import NotStorable, storable_json
from django_jobs.exceptions import InvalidJob, PermanentError

EMPTY = inspect.Parameter.empty
_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_UNCHECKED = (EMPTY, Any, object)


class _Wrong(Exception):
    """A value that does not fit its annotation, at ``path``."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


def _type_name(annotation: object) -> str:
    if isinstance(annotation, type):
        return annotation.__qualname__
    return str(annotation).replace("typing.", "")


def _mismatch(path: str, annotation: object, value: object) -> _Wrong:
    return _Wrong(path, f"must be {_type_name(annotation)}, not {type(value).__name__}")


def _pydantic_model(annotation: object) -> Any:
    """The pydantic ``BaseModel`` subclass ``annotation`` is, or None (also without pydantic)."""
    if not isinstance(annotation, type) or "pydantic" not in sys.modules:
        return None
    from pydantic import BaseModel

    return annotation if issubclass(annotation, BaseModel) else None


def _hints(obj: Any) -> dict[str, Any]:
    """``obj``'s resolved annotations (``Required``, ``NotRequired`` and ``Annotated`` kept);
    one that cannot be resolved (a name imported only for the type checker) is left
    unchecked."""
    try:
        return get_type_hints(obj, include_extras=True)
    except Exception:  # one unresolvable annotation: resolve the others one by one
        return _hints_one_by_one(obj)


def _hints_one_by_one(obj: Any) -> dict[str, Any]:
    namespace = getattr(inspect.unwrap(obj), "__globals__", None)
    found: dict[str, Any] = {}
    for name, annotation in getattr(obj, "__annotations__", {}).items():
        one = types.SimpleNamespace(__annotations__={name: annotation})
        try:
            found.update(get_type_hints(one, globalns=namespace, include_extras=True))
        except Exception:  # noqa: S112  (left unchecked, as the docstring of _hints says)
            continue
    return found


def convert(value: object, annotation: Any, path: str, *, load: bool) -> Any:
    """``value`` checked against ``annotation``: as JSON to store (``load`` False, at enqueue),
    or rebuilt from stored JSON for the handler (``load`` True). Raises ``_Wrong``."""
    if annotation in _UNCHECKED or isinstance(annotation, typing.TypeVar):
        return value
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin in (typing.Annotated, typing.Required, typing.NotRequired):
        return convert(value, args[0], path, load=load)
    if annotation is None or annotation is type(None):
        if value is not None:
            raise _mismatch(path, None, value)
        return None
    if origin is Union or origin is types.UnionType:
        if value is None and type(None) in args:
            return None
        for member in args:
            try:
                return convert(value, member, path, load=load)
            except _Wrong:
                continue
        raise _mismatch(path, annotation, value)
    if origin is Literal:
        if any(value == choice and type(value) is type(choice) for choice in args):
            return value
        raise _Wrong(path, f"must be one of {', '.join(repr(a) for a in args)}, not {value!r}")
    if annotation is bool:
        if isinstance(value, bool):
            return value
        raise _mismatch(path, annotation, value)
    if annotation is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if load and isinstance(value, float) and value.is_integer():  # JSON's 1.0 is 1
            return int(value)
        raise _mismatch(path, annotation, value)
    if annotation is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value) if load else value
        raise _mismatch(path, annotation, value)
    if annotation is str:
        if isinstance(value, str):
            return value
        raise _mismatch(path, annotation, value)
    base = origin or annotation
    if base in (list, tuple, set, frozenset, Sequence):
        return _sequence(value, annotation, base, args, path, load)
    if base in (dict, Mapping):
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise _Wrong(path, f"must be {_type_name(annotation)} with string keys, "
                         f"not {type(value).__name__}")
        item = args[1] if len(args) == 2 else Any
        return {k: convert(v, item, f"{path}.{k}", load=load) for k, v in value.items()}
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        return _dataclass(value, annotation, path, load)
    if is_typeddict(annotation):
        return _typeddict(value, annotation, path, load)
    model = _pydantic_model(annotation)
    if model is not None:
        return _pydantic(value, model, path, load)
    return value  # an annotation with no check of its own: the JSON rule decides


def _sequence(value: object, annotation: Any, base: Any, args: tuple[Any, ...], path: str,
              load: bool) -> Any:
    is_set = isinstance(value, set | frozenset) and base in (set, frozenset) and not load
    if not isinstance(value, list | tuple) and not is_set:
        raise _mismatch(path, annotation, value)
    items = list(value)  # type: ignore[call-overload]
    if base is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
        if len(items) != len(args):
            raise _Wrong(path, f"must have {len(args)} items, not {len(items)}")
        kinds = list(args)
    else:
        kinds = [args[0] if args else Any] * len(items)
    converted = [convert(v, kind, f"{path}[{i}]", load=load)
                 for i, (v, kind) in enumerate(zip(items, kinds, strict=True))]
    if load and base in (tuple, set, frozenset):
        return base(converted)
    return converted


def _dataclass(value: object, cls: type, path: str, load: bool) -> Any:
    hints = _hints(cls)
    fields = [f for f in dataclasses.fields(cls) if f.init]
    if not load:
        if not isinstance(value, cls):
            raise _mismatch(path, cls, value)
        return {f.name: convert(getattr(value, f.name), hints.get(f.name, Any),
                                f"{path}.{f.name}", load=False) for f in fields}
    if not isinstance(value, dict):
        raise _mismatch(path, cls, value)
    known = {f.name for f in fields}
    for key in value:
        if key not in known:
            raise _Wrong(f"{path}.{key}", f"is not a field of {cls.__qualname__}")
    for f in fields:
        if f.name not in value and f.default is dataclasses.MISSING and \
                f.default_factory is dataclasses.MISSING:
            raise _Wrong(f"{path}.{f.name}", "is required")
    return cls(**{name: convert(v, hints.get(name, Any), f"{path}.{name}", load=True)
                  for name, v in value.items()})


def _typeddict(value: object, cls: Any, path: str, load: bool) -> Any:
    if not isinstance(value, dict):
        raise _mismatch(path, cls, value)
    hints = _hints(cls)
    for key in value:
        if key not in hints:
            raise _Wrong(f"{path}.{key}", f"is not a key of {cls.__qualname__}")
    for key in sorted(hints):
        if key not in value and _required_key(cls, key, hints[key]):
            raise _Wrong(f"{path}.{key}", "is required")
    return {k: convert(v, hints[k], f"{path}.{k}", load=load) for k, v in value.items()}


def _required_key(cls: Any, key: str, hint: Any) -> bool:
    """Whether a TypedDict's key is required: ``Required``/``NotRequired`` say so, else the
    class's ``total``. Read from the resolved hint, since a TypedDict written with string
    annotations counts a ``NotRequired`` key among its required keys on Python 3.11."""
    origin = get_origin(hint)
    if origin is typing.NotRequired:
        return False
    if origin is typing.Required:
        return True
    return key in cls.__required_keys__


def _pydantic(value: object, model: Any, path: str, load: bool) -> Any:
    from pydantic import ValidationError

    try:
        instance = value if isinstance(value, model) else model.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"])
        raise _Wrong(f"{path}{where}", first["msg"]) from None
    return instance if load else instance.model_dump(mode="json")


def json_schema(annotation: Any) -> dict[str, Any]:
    """The JSON Schema of the stored JSON ``convert`` accepts for ``annotation`` (for the API's
    OpenAPI document); ``{}`` where it checks nothing."""
    if annotation in _UNCHECKED or isinstance(annotation, typing.TypeVar):
        return {}
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin in (typing.Annotated, typing.Required, typing.NotRequired):
        return json_schema(args[0])
    if annotation is None or annotation is type(None):
        return {"type": "null"}
    if origin is Union or origin is types.UnionType:
        return {"anyOf": [json_schema(member) for member in args]}
    if origin is Literal:
        return {"enum": list(args)}
    simple = {bool: "boolean", int: "integer", float: "number", str: "string"}
    if annotation in simple:
        return {"type": simple[annotation]}
    base = origin or annotation
    if base in (list, tuple, set, frozenset, Sequence):
        if base is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            return {"type": "array", "prefixItems": [json_schema(a) for a in args],
                    "items": False, "minItems": len(args), "maxItems": len(args)}
        return {"type": "array", "items": json_schema(args[0] if args else Any)}
    if base in (dict, Mapping):
        return {"type": "object",
                "additionalProperties": json_schema(args[1] if len(args) == 2 else Any)}
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        hints = _hints(annotation)
        fields = [f for f in dataclasses.fields(annotation) if f.init]
        return _object({f.name: json_schema(hints.get(f.name, Any)) for f in fields},
                       [f.name for f in fields if f.default is dataclasses.MISSING
                        and f.default_factory is dataclasses.MISSING], False)
    if is_typeddict(annotation):
        hints = _hints(annotation)
        return _object({k: json_schema(v) for k, v in hints.items()},
                       [k for k, v in hints.items() if _required_key(annotation, k, v)], False)
    model = _pydantic_model(annotation)
    if model is not None:
        return _inline_defs(model.model_json_schema())
    return {}


def _object(properties: dict[str, Any], required: list[str], extra: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties,
                              "additionalProperties": extra}
    if required:
        schema["required"] = sorted(required)
    return schema


def _inline_defs(schema: dict[str, Any]) -> dict[str, Any]:
    """pydantic's schema with its ``$defs`` written in place of their ``$ref``s, so that it
    stands inside another document."""
    defs = schema.pop("$defs", {})

    def inline(node: Any, depth: int = 0) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/") and depth < 20:
                return inline(defs.get(ref.removeprefix("#/$defs/"), {}), depth + 1)
            return {k: inline(v, depth) for k, v in node.items()}
        if isinstance(node, list):
            return [inline(v, depth) for v in node]
        return node

    return inline(schema)


def _takes_payload_whole(func: Callable[..., object], param: inspect.Parameter) -> bool:
    """Whether a handler's only parameter is the payload itself: unannotated (``def
    f(payload)``), a JSON object (``dict``, ``Mapping``, ``Any``), or a payload type (a
    dataclass, a TypedDict, a pydantic model). A parameter of another type (``def f(order_id:
    int)``) is an argument by name, like those of a handler with several. An annotation that
    cannot be resolved yet (a class defined further down the module) names a payload type."""
    if param.annotation is EMPTY:
        return True
    annotation = _hints(func).get(param.name, EMPTY)
    if annotation is EMPTY:  # unresolved
        return True
    if get_origin(annotation) is typing.Annotated:
        annotation = get_args(annotation)[0]
    base = get_origin(annotation) or annotation
    return (annotation in _UNCHECKED or base in (dict, Mapping)
            or (isinstance(annotation, type) and dataclasses.is_dataclass(annotation))
            or is_typeddict(annotation) or _pydantic_model(annotation) is not None)


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
        return _hints(self.func)

    @cached_property
    def plain_whole(self) -> bool:
        """The payload is handed over as stored: one parameter, nothing to rebuild."""
        if self.whole is None:
            return False
        annotation = self.hints.get(self.whole, EMPTY)
        return annotation in _UNCHECKED or annotation in (dict, list, str, int, bool) or \
            get_origin(annotation) in (dict, list)

    def payload_schema(self) -> dict[str, Any]:
        """The JSON Schema of a stored payload that fits the arguments (``check_stored``)."""
        if self.whole is not None:
            return json_schema(self._annotation(self.whole))
        params = [p for p in self.signature.parameters.values()
                  if p.kind is not inspect.Parameter.VAR_KEYWORD]
        extra = json_schema(self._annotation(self.var_keyword)) \
            if self.var_keyword is not None else False
        return _object({p.name: json_schema(self._annotation(p.name)) for p in params},
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
        except _Wrong as wrong:
            raise InvalidJob({wrong.path: wrong.message}) from None
        return payload

    @staticmethod
    def _storable(name: str, value: object) -> None:
        try:
            storable_json(value)
        except NotStorable as exc:
            raise _Wrong(name, str(exc)) from None

    def _binding_problem(self, args: Sequence[object], kwargs: Mapping[str, object],
                         exc: TypeError) -> dict[str, str]:
        params = self.signature.parameters
        positional = [p for p in params.values() if p.kind in _POSITIONAL]
        if len(args) > len(positional):
            return {"arguments": f"{self.name} takes {len(positional)} positional "
                    f"argument(s), {len(args)} given"}
        problems: dict[str, str] = {}
        if self.var_keyword is None:
            for name in kwargs:
                if name not in params:
                    problems[name] = (f"is not an argument of {self.name} (job options go "
                                      f"in .using({name}=...))")
        by_position = {p.name for p in positional[:len(args)]}
        for name in kwargs:
            if name in by_position:
                problems[name] = "is given twice, by position and by name"
        for p in params.values():
            if p.default is EMPTY and p.kind not in (inspect.Parameter.VAR_POSITIONAL,
                                                     inspect.Parameter.VAR_KEYWORD) \
                    and p.name not in kwargs and p.name not in by_position:
                problems[p.name] = "is required"
        return problems or {"arguments": str(exc)}

    # Run: the stored payload to the handler's call.

    def call(self, payload: Any) -> tuple[tuple[object, ...], dict[str, object]]:
        """The positional and keyword arguments the handler is called with for ``payload``;
        PermanentError if the stored payload does not fit them (running it again would not
        help: the job goes dead for a person to correct its payload)."""
        if self.plain_whole:
            return (payload,), {}
        try:
            return self._load(payload)
        except _Wrong as wrong:
            raise PermanentError(f"the payload does not fit the arguments of {self.name}: "
                                 f"{wrong.path} {wrong.message}") from None

    def check_stored(self, payload: Any) -> None:
        """InvalidJob naming ``payload`` if a payload given whole (``Job.enqueue("type",
        payload)``, the API) does not fit the arguments: refused at enqueue, not at run."""
        if self.plain_whole:
            return
        try:
            self._load(payload)
        except _Wrong as wrong:
            raise InvalidJob({"payload": f"does not fit the arguments of {self.name}: "
                              f"{wrong.path} {wrong.message}"}) from None

    def _load(self, payload: Any) -> tuple[tuple[object, ...], dict[str, object]]:
        if self.whole is not None:
            return (convert(payload, self._annotation(self.whole), self.whole, load=True),), {}
        return (), self._keywords(payload)

    def _keywords(self, payload: Any) -> dict[str, object]:
        if not isinstance(payload, dict):
            raise _Wrong("payload", f"must be an object of arguments by name, not "
                         f"{type(payload).__name__}")
        params = self.signature.parameters
        for p in params.values():
            if p.default is EMPTY and p.kind is not inspect.Parameter.VAR_KEYWORD \
                    and p.name not in payload:
                raise _Wrong(p.name, "is required")
        kwargs: dict[str, object] = {}
        for name, value in payload.items():
            if (name not in params or name == self.var_keyword) and self.var_keyword is None:
                raise _Wrong(name, f"is not an argument of {self.name}")
            kwargs[name] = convert(value, self._annotation(name), name, load=True)
        return kwargs
