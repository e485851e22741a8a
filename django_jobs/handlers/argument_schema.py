"""The JSON Schema of the stored JSON a handler's annotation accepts (what
``handlers/argument_checks.py`` checks), for the API's OpenAPI document."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Union, get_args, get_origin, is_typeddict

from django_jobs.handlers.handler_annotations import (
    UNCHECKED,
    pydantic_model,
    required_key,
    resolved_hints,
)


def json_schema(annotation: Any) -> dict[str, Any]:
    """The JSON Schema of the stored JSON ``convert`` accepts for ``annotation`` (for the API's
    OpenAPI document); ``{}`` where it checks nothing."""
    if annotation in UNCHECKED or isinstance(annotation, typing.TypeVar):
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
        hints = resolved_hints(annotation)
        fields = [f for f in dataclasses.fields(annotation) if f.init]
        return object_schema({f.name: json_schema(hints.get(f.name, Any)) for f in fields},
                             [f.name for f in fields if f.default is dataclasses.MISSING
                              and f.default_factory is dataclasses.MISSING], False)
    if is_typeddict(annotation):
        hints = resolved_hints(annotation)
        return object_schema({k: json_schema(v) for k, v in hints.items()},
                             [k for k, v in hints.items() if required_key(annotation, k, v)],
                             False)
    model = pydantic_model(annotation)
    if model is not None:
        return _inline_defs(model.model_json_schema())
    return {}


def object_schema(properties: dict[str, Any], required: list[str], extra: Any) -> dict[str, Any]:
    """A JSON object's schema: its properties, which are required, and what other keys hold."""
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
