"""A value checked against a handler's annotation, per kind of type (plain types, unions,
``Literal``, sequences, mappings, dataclasses, TypedDicts, pydantic models): as JSON to store at
enqueue, or rebuilt from the stored JSON for the handler (``handlers/handler_arguments.py``)."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal, get_args, get_origin, is_typeddict

from django_jobs.handlers.handler_annotations import (
    MAPPINGS,
    SEQUENCES,
    WRAPPERS,
    Wrong,
    fixed_length,
    init_fields,
    is_none,
    is_union,
    mismatch,
    pydantic_model,
    required_field,
    required_key,
    resolved_hints,
    type_name,
    unchecked,
)


def convert(value: object, annotation: Any, path: str, *, load: bool) -> Any:
    """``value`` checked against ``annotation``: as JSON to store (``load`` False, at enqueue),
    or rebuilt from stored JSON for the handler (``load`` True). Raises ``Wrong``."""
    if unchecked(annotation):
        return value
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin in WRAPPERS:
        return convert(value, args[0], path, load=load)
    if is_none(annotation):
        return _none(value, path)
    if is_union(origin):
        return _union(value, annotation, args, path, load)
    if origin is Literal:
        return _literal(value, args, path)
    scalar = _SCALARS.get(annotation) if isinstance(annotation, type) else None
    if scalar is not None:
        return scalar(value, path, load)
    return _structure(value, annotation, origin or annotation, args, path, load)


def _none(value: object, path: str) -> None:
    if value is not None:
        raise mismatch(path, None, value)


def _union(value: object, annotation: Any, args: tuple[Any, ...], path: str,
           load: bool) -> Any:
    """The value as the first member of the union that takes it."""
    if value is None and type(None) in args:
        return None
    for member in args:
        try:
            return convert(value, member, path, load=load)
        except Wrong:
            continue
    raise mismatch(path, annotation, value)


def _literal(value: object, choices: tuple[Any, ...], path: str) -> Any:
    """One of the choices, of its type too (``1`` is not ``True`` nor ``1.0``)."""
    if any(value == choice and type(value) is type(choice) for choice in choices):
        return value
    raise Wrong(path, f"must be one of {', '.join(repr(a) for a in choices)}, not {value!r}")


def _bool(value: object, path: str, load: bool) -> bool:
    if isinstance(value, bool):
        return value
    raise mismatch(path, bool, value)


def _int(value: object, path: str, load: bool) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if load and isinstance(value, float) and value.is_integer():  # JSON's 1.0 is 1
        return int(value)
    raise mismatch(path, int, value)


def _float(value: object, path: str, load: bool) -> float:
    """An int is a float too; rebuilt as one for the handler."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value) if load else value
    raise mismatch(path, float, value)


def _str(value: object, path: str, load: bool) -> str:
    if isinstance(value, str):
        return value
    raise mismatch(path, str, value)


_SCALARS = {bool: _bool, int: _int, float: _float, str: _str}


def _structure(value: object, annotation: Any, base: Any, args: tuple[Any, ...], path: str,
               load: bool) -> Any:
    """A value of a type with items or fields: a sequence, a mapping, a dataclass, a
    TypedDict or a pydantic model; any other annotation has no check of its own (the JSON
    rule decides)."""
    if base in SEQUENCES:
        return _sequence(value, annotation, base, args, path, load)
    if base in MAPPINGS:
        return _mapping(value, annotation, args, path, load)
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        return _dataclass(value, annotation, path, load)
    if is_typeddict(annotation):
        return _typeddict(value, annotation, path, load)
    model = pydantic_model(annotation)
    if model is not None:
        return _pydantic(value, model, path, load)
    return value


def _sequence(value: object, annotation: Any, base: Any, args: tuple[Any, ...], path: str,
              load: bool) -> Any:
    items = _items(value, annotation, base, path, load)
    if fixed_length(base, args):
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


def _items(value: object, annotation: Any, base: Any, path: str, load: bool) -> list[Any]:
    """A sequence's items: of a list or a tuple, or at enqueue of a set for a set type."""
    is_set = isinstance(value, set | frozenset) and base in (set, frozenset) and not load
    if not isinstance(value, list | tuple) and not is_set:
        raise mismatch(path, annotation, value)
    return list(value)  # type: ignore[call-overload]


def _mapping(value: object, annotation: Any, args: tuple[Any, ...], path: str,
             load: bool) -> dict[str, Any]:
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise Wrong(path, f"must be {type_name(annotation)} with string keys, "
                    f"not {type(value).__name__}")
    item = args[1] if len(args) == 2 else Any
    return {k: convert(v, item, f"{path}.{k}", load=load) for k, v in value.items()}


def _dataclass(value: object, cls: type, path: str, load: bool) -> Any:
    if load:
        return _dataclass_from_json(value, cls, path)
    if not isinstance(value, cls):
        raise mismatch(path, cls, value)
    hints = resolved_hints(cls)
    return {f.name: convert(getattr(value, f.name), hints.get(f.name, Any),
                            f"{path}.{f.name}", load=False) for f in init_fields(cls)}


def _dataclass_from_json(value: object, cls: type, path: str) -> Any:
    """The dataclass rebuilt from its stored JSON object: no key but its fields', none of the
    fields without a default missing."""
    if not isinstance(value, dict):
        raise mismatch(path, cls, value)
    fields = init_fields(cls)
    known = {f.name for f in fields}
    for key in value:
        if key not in known:
            raise Wrong(f"{path}.{key}", f"is not a field of {cls.__qualname__}")
    for f in fields:
        if f.name not in value and required_field(f):
            raise Wrong(f"{path}.{f.name}", "is required")
    hints = resolved_hints(cls)
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
