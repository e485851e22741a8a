"""Hypothesis strategies for payloads and results, and what each database gives back for them.

``as_stored`` is the documented rule (docs/explanation-guarantees.md, "What a payload can
hold"): JSON's own normalisation on both databases, plus, on PostgreSQL, jsonb's numbers (a
float written with an exponent, 1e16 and up, reads back as the integer it names; -0.0 as 0.0).
``same`` is
equality that also tells ``1`` from ``1.0`` and ``True``, and ``0.0`` from ``-0.0``.
"""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any

from hypothesis import strategies as st

# Every character PostgreSQL can store: all but NUL and the surrogates.
STORABLE_CHARACTERS = st.characters(exclude_characters="\x00", exclude_categories=("Cs",))
# Strings that read as JSON or as the escapes the storability check looks for.
LOOKS_LIKE_JSON = st.sampled_from([
    "", " ", "null", "true", "false", "7", "-0", "1e400", "NaN", '"x"', "[]", "{}",
    '{"order_id": 42}', "[1, 2]", "\\u0000", "\\\\u0000", "\\ud800", "é", "😀", "\u2028",
])
# Python's json.dumps refuses an int of more than 4,300 digits (sys.get_int_max_str_digits).
BIG = 10**4299

texts = st.one_of(
    st.text(STORABLE_CHARACTERS, max_size=30),
    LOOKS_LIKE_JSON,
    st.recursive(st.none() | st.integers() | st.text(STORABLE_CHARACTERS, max_size=5),
                 lambda inner: st.lists(inner, max_size=3), max_leaves=5).map(json.dumps),
)
numbers = st.one_of(
    st.integers(),
    st.integers(min_value=-BIG, max_value=BIG),
    st.sampled_from([2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**53 + 1, BIG, -BIG]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([-0.0, 1e16, 1.5e16, 1e23, 5e-324, 1.7976931348623157e308, 1e-05, 0.1]),
)
scalars = st.none() | st.booleans() | numbers | texts


def json_values(leaves: st.SearchStrategy = scalars) -> st.SearchStrategy:
    """Any JSON value: objects, arrays and scalars, nested."""
    return st.recursive(
        leaves,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
        max_leaves=12,
    )


# What Python code may hand over beyond JSON's own types: tuples, and keys that are ints,
# floats, booleans or None (they become strings).
python_keys = texts | st.integers() | st.booleans() | st.none() | st.floats(allow_nan=False,
                                                                            allow_infinity=False)
python_values = st.recursive(
    scalars,
    lambda inner: (st.lists(inner, max_size=4) | st.lists(inner, max_size=4).map(tuple)
                   | st.dictionaries(python_keys, inner, max_size=4)),
    max_leaves=12,
)

# A string the database cannot store: a NUL or a lone surrogate somewhere in it.
unstorable_texts = st.builds(
    lambda before, bad, after: before + bad + after,
    st.text(STORABLE_CHARACTERS, max_size=5),
    st.sampled_from(["\x00", "\ud800", "\udfff", "\udc00"]) | st.characters(categories=("Cs",)),
    st.text(STORABLE_CHARACTERS, max_size=5),
)


@st.composite
def with_unstorable(draw: Any) -> Any:
    """A JSON value with an unstorable string put in one place: a value, a key, or the top."""
    value = draw(json_values())
    bad = draw(unstorable_texts)
    places = ["top"]
    if isinstance(value, list):
        places.append("item")
    if isinstance(value, dict):
        places += ["value", "key"]
    place = draw(st.sampled_from(places))
    if place == "top":
        return bad
    if place == "item":
        return [*value, bad]
    if place == "value":
        return {**value, draw(texts): bad}
    return {**value, bad: draw(scalars)}


def as_stored(value: Any, vendor: str) -> Any:
    """``value`` as it reads back from a job on ``vendor`` (postgresql or sqlite)."""
    loaded = json.loads(json.dumps(value))
    return _jsonb_numbers(loaded) if vendor == "postgresql" else loaded


def _jsonb_numbers(value: Any) -> Any:
    if isinstance(value, float):
        if value == 0:
            return 0.0  # numeric has no negative zero
        text = repr(value)
        # numeric keeps the digits after the point: an exponent form (1e+16 and up) has none
        return int(Decimal(text)) if "e+" in text else value
    if isinstance(value, list):
        return [_jsonb_numbers(item) for item in value]
    if isinstance(value, dict):
        return {key: _jsonb_numbers(item) for key, item in value.items()}
    return value


def same(a: Any, b: Any) -> bool:
    """``a == b``, with the types equal at every level and the sign of a zero the same."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[key], b[key]) for key in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b
