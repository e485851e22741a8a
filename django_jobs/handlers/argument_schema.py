"""The JSON Schema of the stored JSON a handler's annotation accepts (what
``handlers/argument_checks.py`` checks), for the API's OpenAPI document."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal, get_args, get_origin, is_typeddict

from django_jobs.handlers.handler_annotations import (
    MAPPINGS,
    SEQUENCES,
    WRAPPERS,
    fixed_length,
    init_fields,
    is_none,
    is_union,
    pydantic_model,
    required_field,
    required_key,
    resolved_hints,
    unchecked,
)

_SIMPLE = {bool: "boolean", int: "integer", float: "number", str: "string"}


def json_schema(annotation: Any) -> dict[str, Any]:
    """The JSON Schema of the stored JSON ``convert`` accepts for ``annotation`` (for the API's
    OpenAPI document); ``{}`` where it checks nothing."""
    if unchecked(annotation):
        return {}
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin in WRAPPERS:
        return json_schema(args[0])
    if is_none(annotation):
        return {"type": "null"}
    if is_union(origin):
        return {"anyOf": [json_schema(member) for member in args]}
    if origin is Literal:
        return {"enum": list(args)}
    if annotation in _SIMPLE:
        return {"type": _SIMPLE[annotation]}
    return _structure_schema(annotation, origin or annotation, args)


def _structure_schema(annotation: Any, base: Any, args: tuple[Any, ...]) -> dict[str, Any]:
    """The schema of a type with items or fields (what ``convert``'s ``_structure`` checks);
    ``{}`` for any other annotation."""
    if base in SEQUENCES:
        return _array_schema(base, args)
    if base in MAPPINGS:
        return {"type": "object",
                "additionalProperties": json_schema(args[1] if len(args) == 2 else Any)}
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        return _dataclass_schema(annotation)
    if is_typeddict(annotation):
        return _typeddict_schema(annotation)
    model = pydantic_model(annotation)
    if model is not None:
        return _inline_defs(model.model_json_schema())
    return {}


def _array_schema(base: Any, args: tuple[Any, ...]) -> dict[str, Any]:
    if fixed_length(base, args):
        return {"type": "array", "prefixItems": [json_schema(a) for a in args],
                "items": False, "minItems": len(args), "maxItems": len(args)}
    return {"type": "array", "items": json_schema(args[0] if args else Any)}


def _dataclass_schema(cls: type) -> dict[str, Any]:
    hints = resolved_hints(cls)
    fields = init_fields(cls)
    return object_schema({f.name: json_schema(hints.get(f.name, Any)) for f in fields},
                         [f.name for f in fields if required_field(f)], False)


def _typeddict_schema(cls: Any) -> dict[str, Any]:
    hints = resolved_hints(cls)
    return object_schema({k: json_schema(v) for k, v in hints.items()},
                         [k for k, v in hints.items() if required_key(cls, k, v)], False)


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
