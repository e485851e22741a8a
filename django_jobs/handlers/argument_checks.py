"""A value checked against a handler's annotation, per kind of type (plain types, unions,
``Literal``, sequences, mappings, dataclasses, TypedDicts, pydantic models): as JSON to store at
enqueue, or rebuilt from the stored JSON for the handler (``handlers/handler_arguments.py``)."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Union, get_args, get_origin, is_typeddict

from django_jobs.handlers.handler_annotations import (
    UNCHECKED,
    Wrong,
    mismatch,
    pydantic_model,
    required_key,
    resolved_hints,
    type_name,
)


def convert(value: object, annotation: Any, path: str, *, load: bool) -> Any:
    """``value`` checked against ``annotation``: as JSON to store (``load`` False, at enqueue),
    or rebuilt from stored JSON for the handler (``load`` True). Raises ``Wrong``."""
    if annotation in UNCHECKED or isinstance(annotation, typing.TypeVar):
        return value
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin in (typing.Annotated, typing.Required, typing.NotRequired):
        return convert(value, args[0], path, load=load)
    if annotation is None or annotation is type(None):
        if value is not None:
            raise mismatch(path, None, value)
        return None
    if origin is Union or origin is types.UnionType:
        if value is None and type(None) in args:
            return None
        for member in args:
            try:
                return convert(value, member, path, load=load)
            except Wrong:
                continue
        raise mismatch(path, annotation, value)
    if origin is Literal:
        if any(value == choice and type(value) is type(choice) for choice in args):
            return value
        raise Wrong(path, f"must be one of {', '.join(repr(a) for a in args)}, not {value!r}")
    if annotation is bool:
        if isinstance(value, bool):
            return value
        raise mismatch(path, annotation, value)
    if annotation is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if load and isinstance(value, float) and value.is_integer():  # JSON's 1.0 is 1
            return int(value)
        raise mismatch(path, annotation, value)
    if annotation is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value) if load else value
        raise mismatch(path, annotation, value)
    if annotation is str:
        if isinstance(value, str):
            return value
        raise mismatch(path, annotation, value)
    base = origin or annotation
    if base in (list, tuple, set, frozenset, Sequence):
        return _sequence(value, annotation, base, args, path, load)
    if base in (dict, Mapping):
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise Wrong(path, f"must be {type_name(annotation)} with string keys, "
                        f"not {type(value).__name__}")
        item = args[1] if len(args) == 2 else Any
        return {k: convert(v, item, f"{path}.{k}", load=load) for k, v in value.items()}
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        return _dataclass(value, annotation, path, load)
    if is_typeddict(annotation):
        return _typeddict(value, annotation, path, load)
    model = pydantic_model(annotation)
    if model is not None:
        return _pydantic(value, model, path, load)
    return value  # an annotation with no check of its own: the JSON rule decides


def _sequence(value: object, annotation: Any, base: Any, args: tuple[Any, ...], path: str,
              load: bool) -> Any:
    is_set = isinstance(value, set | frozenset) and base in (set, frozenset) and not load
    if not isinstance(value, list | tuple) and not is_set:
        raise mismatch(path, annotation, value)
    items = list(value)  # type: ignore[call-overload]
    if base is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
        if len(items) != len(args):
            raise Wrong(path, f"must have {len(args)} items, not {len(items)}")
        kinds = list(args)
    else:
        kinds = [args[0] if args else Any] * len(items)
    converted = [convert(v, kind, f"{path}[{i}]", load=load)
                 for i, (v, kind) in enumerate(zip(items, kinds, strict=True))]
    if load and base in (tuple, set, frozenset):
        return base(converted)
    return converted


def _dataclass(value: object, cls: type, path: str, load: bool) -> Any:
    hints = resolved_hints(cls)
    fields = [f for f in dataclasses.fields(cls) if f.init]
    if not load:
        if not isinstance(value, cls):
            raise mismatch(path, cls, value)
        return {f.name: convert(getattr(value, f.name), hints.get(f.name, Any),
                                f"{path}.{f.name}", load=False) for f in fields}
    if not isinstance(value, dict):
        raise mismatch(path, cls, value)
    known = {f.name for f in fields}
    for key in value:
        if key not in known:
            raise Wrong(f"{path}.{key}", f"is not a field of {cls.__qualname__}")
    for f in fields:
        if f.name not in value and f.default is dataclasses.MISSING and \
                f.default_factory is dataclasses.MISSING:
            raise Wrong(f"{path}.{f.name}", "is required")
    return cls(**{name: convert(v, hints.get(name, Any), f"{path}.{name}", load=True)
                  for name, v in value.items()})


def _typeddict(value: object, cls: Any, path: str, load: bool) -> Any:
    if not isinstance(value, dict):
        raise mismatch(path, cls, value)
    hints = resolved_hints(cls)
    for key in value:
        if key not in hints:
            raise Wrong(f"{path}.{key}", f"is not a key of {cls.__qualname__}")
    for key in sorted(hints):
        if key not in value and required_key(cls, key, hints[key]):
            raise Wrong(f"{path}.{key}", "is required")
    return {k: convert(v, hints[k], f"{path}.{k}", load=load) for k, v in value.items()}


def _pydantic(value: object, model: Any, path: str, load: bool) -> Any:
    from pydantic import ValidationError

    try:
        instance = value if isinstance(value, model) else model.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"])
        raise Wrong(f"{path}{where}", first["msg"]) from None
    return instance if load else instance.model_dump(mode="json")
