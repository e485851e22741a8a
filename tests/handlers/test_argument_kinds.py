"""Every kind of annotation a handler's argument may have, generated and nested
(``handlers/argument_checks.py``, ``handlers/argument_schema.py``): what ``convert`` stores
is JSON the annotation's schema holds, and it rebuilds to a value that stores and rebuilds
the same; stored JSON it refuses to rebuild, the schema refuses too; a refusal names where
it is and why."""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, NotRequired, Optional, TypedDict, Union

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema_rs import Draft202012Validator  # schemathesis's validator
from pydantic import BaseModel

from django_jobs.handlers.argument_checks import convert
from django_jobs.handlers.argument_schema import json_schema
from django_jobs.handlers.handler_annotations import Wrong

pytestmark = pytest.mark.db_independent  # no database: once per Django in the whole suite


@dataclasses.dataclass(frozen=True)
class Point:
    x: int
    y: float = 0.0
    label: str | None = dataclasses.field(default=None)


@dataclasses.dataclass
class Segment:
    start: Point
    end: Point
    tags: list[str] = dataclasses.field(default_factory=list)


class Movie(TypedDict):
    title: str
    year: NotRequired[int]


class Partial(TypedDict, total=False):
    name: str
    score: float


class Pet(BaseModel):
    name: str
    age: int


CHOICES = st.sampled_from([1, 2, "a", "b", True, None, 0.5])
small_ints = st.integers(-(2**53), 2**53)
floats = st.floats(allow_nan=False, allow_infinity=False)
words = st.text(max_size=5)

leaves = st.one_of(
    st.sampled_from([bool, int, float, str, None, type(None), Any, object, Point, Segment,
                     Movie, Partial, Pet, list, dict, tuple, typing.TypeVar("T")]),
    st.lists(CHOICES, min_size=1, max_size=3, unique_by=lambda c: (type(c), c)).map(
        lambda choices: Literal[tuple(choices)]),
)


def _compound(inner: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(
        inner.map(lambda a: list[a]),
        inner.map(lambda a: tuple[a, ...]),
        st.tuples(inner, inner).map(lambda ab: tuple[ab[0], ab[1]]),
        st.sampled_from([int, str, bool]).map(lambda a: set[a]),
        st.sampled_from([int, str]).map(lambda a: frozenset[a]),
        inner.map(lambda a: Sequence[a]),
        inner.map(lambda a: dict[str, a]),
        inner.map(lambda a: Mapping[str, a]),
        st.tuples(inner, inner).map(lambda ab: Union[ab[0], ab[1]]),  # noqa: UP007
        inner.map(lambda a: Optional[a]),  # noqa: UP045
        inner.map(lambda a: Annotated[a, "meta"]),
    )


annotations = st.recursive(leaves, _compound, max_leaves=5)


def fitting(annotation: Any) -> st.SearchStrategy:
    """Values the annotation takes at enqueue (as the caller passes them)."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Annotated:
        return fitting(args[0])
    if origin is Union:
        return st.one_of(*(fitting(a) for a in args))
    if origin is Literal:
        return st.sampled_from(args)
    if annotation is None or annotation is type(None):
        return st.none()
    simple = {bool: st.booleans(), int: small_ints, float: floats | small_ints, str: words,
              Point: st.builds(Point, x=small_ints, y=floats, label=st.none() | words),
              Movie: st.fixed_dictionaries({"title": words}, optional={"year": small_ints}),
              Partial: st.fixed_dictionaries({}, optional={"name": words, "score": floats}),
              Pet: st.builds(Pet, name=words, age=small_ints),
              list: st.lists(small_ints, max_size=2), dict: st.dictionaries(words, words,
                                                                            max_size=2),
              tuple: st.lists(words, max_size=2).map(tuple)}
    if annotation in simple:
        return simple[annotation]
    if annotation is Segment:
        points = fitting(Point)
        return st.builds(Segment, start=points, end=points, tags=st.lists(words, max_size=2))
    if origin in (list, Sequence):
        return st.lists(fitting(args[0]), max_size=3)
    if origin in (set, frozenset):
        return st.sets(fitting(args[0]), max_size=3).map(origin)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return st.lists(fitting(args[0]), max_size=3).map(tuple)
    if origin is tuple:
        return st.tuples(*(fitting(a) for a in args))
    if origin in (dict, Mapping):
        return st.dictionaries(words, fitting(args[1]), max_size=3)
    return st.recursive(st.none() | st.booleans() | small_ints | words,
                        lambda inner: st.lists(inner, max_size=2), max_leaves=4)


json_values = st.recursive(
    st.none() | st.booleans() | small_ints | floats | words,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(words, inner, max_size=3),
    max_leaves=8,
)


@st.composite
def annotated_values(draw: st.DrawFn) -> tuple[Any, Any]:
    annotation = draw(annotations)
    return annotation, draw(fitting(annotation))


@settings(max_examples=250)
@given(annotated_values())
def test_what_is_stored_is_json_the_schema_holds_and_rebuilds_to_the_same(case):
    annotation, value = case
    stored = convert(value, annotation, "arg", load=False)
    assert json.loads(json.dumps(stored)) == stored
    assert Draft202012Validator(json_schema(annotation)).is_valid(stored), (annotation, stored)
    rebuilt = convert(stored, annotation, "arg", load=True)
    again = convert(rebuilt, annotation, "arg", load=False)  # a set's items in another order
    rebuilt_again = convert(again, annotation, "arg", load=True)
    if not _inside(annotation, Union):  # a union's value is its first member that takes it
        assert rebuilt_again == rebuilt


@settings(max_examples=250)
@given(annotations, json_values)
def test_stored_json_is_rebuilt_where_the_schema_holds_it(annotation, stored):
    """Loading checks what the schema describes: a refusal names a place under the argument,
    and JSON refused is JSON the schema refuses (the schema may hold more: it cannot tell a
    Literal's ``1`` from ``1.0`` or ``True``)."""
    schema = Draft202012Validator(json_schema(annotation))
    try:
        convert(stored, annotation, "arg", load=True)
    except Wrong as wrong:
        assert wrong.path.startswith("arg"), wrong.path
        assert wrong.message
        if not _inside(annotation, Literal):
            assert not schema.is_valid(stored), (annotation, stored, wrong.message)
    else:
        assert schema.is_valid(stored), (annotation, stored)


def _inside(annotation: Any, kind: Any) -> bool:
    """Whether ``annotation`` is or holds a ``kind`` (``Literal`` or ``Union``)."""
    return typing.get_origin(annotation) is kind or any(
        _inside(a, kind) for a in typing.get_args(annotation))


@pytest.mark.parametrize(("annotation", "value", "load", "path", "message"), [
    (int, "1", False, "arg", "must be int, not str"),
    (int, True, False, "arg", "must be int, not bool"),
    (int, 1.0, False, "arg", "must be int, not float"),
    (float, True, True, "arg", "must be float, not bool"),
    (bool, 1, False, "arg", "must be bool, not int"),
    (str, None, False, "arg", "must be str, not NoneType"),
    (None, 0, False, "arg", "must be None, not int"),
    (int | None, "x", False, "arg", "must be int | None, not str"),
    (Literal[1, "a"], 2, False, "arg", "must be one of 1, 'a', not 2"),
    (list[int], [1, "x"], False, "arg[1]", "must be int, not str"),
    (list[int], {1}, False, "arg", "must be list[int], not set"),
    (tuple[int, str], [1], True, "arg", "must have 2 items, not 1"),
    (dict[str, int], {1: 1}, False, "arg", "must be dict[str, int] with string keys, not dict"),
    (dict[str, int], {"k": "v"}, False, "arg.k", "must be int, not str"),
    (Point, {"x": 1, "z": 2}, True, "arg.z", "is not a field of Point"),
    (Point, {"y": 1.0}, True, "arg.x", "is required"),
    (Point, {"x": 1}, False, "arg", "must be Point, not dict"),
    (Point, [1], True, "arg", "must be Point, not list"),
    (Segment, {"start": {"x": 1}, "end": {"x": "2"}}, True, "arg.end.x", "must be int, not str"),
    (Movie, {"year": 1}, True, "arg.title", "is required"),
    (Movie, {"title": "t", "cast": []}, True, "arg.cast", "is not a key of Movie"),
    (Movie, [], True, "arg", "must be Movie, not list"),
    (Pet, {"name": "n", "age": "old"}, True, "arg.age",
     "Input should be a valid integer, unable to parse string as an integer"),
])
def test_a_refusal_names_the_place_and_the_reason(annotation, value, load, path, message):
    with pytest.raises(Wrong) as caught:
        convert(value, annotation, "arg", load=load)
    assert (caught.value.path, caught.value.message) == (path, message)


@pytest.mark.parametrize(("annotation", "value", "load", "expected"), [
    (int, 2.0, True, 2),
    (float, 2, True, 2.0),
    (float, 2, False, 2),
    (tuple[int, ...], [1, 2], True, (1, 2)),
    (set[int], {3}, False, [3]),
    (frozenset[str], ["a"], True, frozenset({"a"})),
    (Sequence[int], (1, 2), False, [1, 2]),
    (Point, Point(1, 2.0), False, {"x": 1, "y": 2.0, "label": None}),
    (Point, {"x": 1}, True, Point(1)),
    (Pet, Pet(name="n", age=1), False, {"name": "n", "age": 1}),
    (Pet, {"name": "n", "age": 1}, True, Pet(name="n", age=1)),
    (Annotated[int, "m"], 1, False, 1),
    (typing.Callable, "anything", False, "anything"),
])
def test_a_value_is_stored_and_rebuilt_in_its_kind(annotation, value, load, expected):
    converted = convert(value, annotation, "arg", load=load)
    assert converted == expected
    assert type(converted) is type(expected)


@pytest.mark.parametrize(("annotation", "schema"), [
    (Any, {}),
    (None, {"type": "null"}),
    (int | None, {"anyOf": [{"type": "integer"}, {"type": "null"}]}),
    (Literal["a", 1], {"enum": ["a", 1]}),
    (tuple[int, str], {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}],
                       "items": False, "minItems": 2, "maxItems": 2}),
    (tuple[str, ...], {"type": "array", "items": {"type": "string"}}),
    (list, {"type": "array", "items": {}}),
    (Mapping[str, bool], {"type": "object", "additionalProperties": {"type": "boolean"}}),
    (dict, {"type": "object", "additionalProperties": {}}),
    (Point, {"type": "object", "additionalProperties": False, "required": ["x"],
             "properties": {"x": {"type": "integer"}, "y": {"type": "number"},
                            "label": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}),
    (Partial, {"type": "object", "additionalProperties": False,
               "properties": {"name": {"type": "string"}, "score": {"type": "number"}}}),
    (Movie, {"type": "object", "additionalProperties": False, "required": ["title"],
             "properties": {"title": {"type": "string"}, "year": {"type": "integer"}}}),
    (typing.Callable, {}),
])
def test_the_schema_of_each_kind(annotation, schema):
    assert json_schema(annotation) == schema
