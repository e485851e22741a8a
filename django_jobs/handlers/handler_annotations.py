"""Reading a handler's annotations: their resolved hints, the names and the mismatches a check
of a value against one reports (``Wrong``), and the kinds of type the checks know apart
(``handlers/argument_checks.py``, ``handlers/argument_schema.py``)."""

from __future__ import annotations

import dataclasses
import inspect
import sys
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Union, get_origin, get_type_hints

EMPTY = inspect.Parameter.empty
UNCHECKED = (EMPTY, Any, object)  # annotations held only to the payload's JSON rule
WRAPPERS = (typing.Annotated, typing.Required, typing.NotRequired)  # checked as what they wrap
SEQUENCES = (list, tuple, set, frozenset, Sequence)  # stored as a JSON array
MAPPINGS = (dict, Mapping)  # stored as a JSON object


def unchecked(annotation: object) -> bool:
    """Whether ``annotation`` leaves its value to the payload's JSON rule alone."""
    return annotation in UNCHECKED or isinstance(annotation, typing.TypeVar)


def is_none(annotation: object) -> bool:
    return annotation is None or annotation is type(None)


def is_union(origin: object) -> bool:
    """Whether ``origin`` is a union's, written ``Union[A, B]`` or ``A | B``."""
    return origin is Union or origin is types.UnionType


def fixed_length(base: object, args: tuple[Any, ...]) -> bool:
    """Whether a sequence type is a tuple of one type per item (``tuple[int, str]``), not of
    any length (``tuple[int, ...]``)."""
    return base is tuple and bool(args) and not (len(args) == 2 and args[1] is Ellipsis)


def init_fields(cls: Any) -> list[dataclasses.Field[Any]]:
    """A dataclass's fields its constructor takes."""
    return [f for f in dataclasses.fields(cls) if f.init]


def required_field(field: dataclasses.Field[Any]) -> bool:
    """Whether a dataclass's field has no default, so that its value must be given."""
    return field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING


class Wrong(Exception):
    """A value that does not fit its annotation, at ``path``."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


def type_name(annotation: object) -> str:
    if isinstance(annotation, type):
        return annotation.__qualname__
    return str(annotation).replace("typing.", "")


def mismatch(path: str, annotation: object, value: object) -> Wrong:
    return Wrong(path, f"must be {type_name(annotation)}, not {type(value).__name__}")


def pydantic_model(annotation: object) -> Any:
    """The pydantic ``BaseModel`` subclass ``annotation`` is, or None (also without pydantic)."""
    if not isinstance(annotation, type) or "pydantic" not in sys.modules:
        return None
    from pydantic import BaseModel

    return annotation if issubclass(annotation, BaseModel) else None


def resolved_hints(obj: Any) -> dict[str, Any]:
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
        except Exception:  # noqa: S112  (left unchecked, as the docstring of resolved_hints says)
            continue
    return found


def required_key(cls: Any, key: str, hint: Any) -> bool:
    """Whether a TypedDict's key is required: ``Required``/``NotRequired`` say so, else the
    class's ``total``. Read from the resolved hint, since a TypedDict written with string
    annotations counts a ``NotRequired`` key among its required keys on Python 3.11."""
    origin = get_origin(hint)
    if origin is typing.NotRequired:
        return False
    if origin is typing.Required:
        return True
    return key in cls.__required_keys__
