"""canonical_args: deterministic JSON for loop detection (examples and invariants)."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from personae.tools import canonical_args

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
_json = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)
_args = st.dictionaries(st.text(max_size=8), _json, max_size=6)


def test_examples() -> None:
    assert canonical_args({"b": 1, "a": [1.0, -0.0, 2.5]}) == '{"a":[1,0,2.5],"b":1}'
    assert canonical_args({"path": "  a.txt\r\n"}) == '{"path":"a.txt"}'
    assert canonical_args({"x": None, "y": 1}) == canonical_args({"y": 1}) == '{"y":1}'
    assert canonical_args(None) == canonical_args({}) == "{}"
    assert canonical_args('{"b": 2, "a": 1}') == '{"a":1,"b":2}'  # raw JSON from a model
    assert canonical_args({"n": float("nan"), "i": -math.inf}) == '{"i":"-Infinity","n":"NaN"}'
    assert canonical_args({"s": {3, 1, 2}, "t": (1, 2)}) == '{"s":[1,2,3],"t":[1,2]}'
    assert canonical_args({"d": Decimal("2.0")}) == '{"d":2}'
    assert canonical_args({"k": "café"}) == canonical_args({"k": "cafe\u0301"})  # NFC
    assert canonical_args({"k": True}) == '{"k":true}'  # bool is not turned into 1

    class Args(BaseModel):
        path: str
        limit: int | None = None

    assert canonical_args({"a": Args(path="x")}) == '{"a":{"path":"x"}}'
    with pytest.raises(TypeError, match="object"):
        canonical_args({"o": object()})


@given(_args, st.randoms(use_true_random=False))
def test_key_order_does_not_matter(args: dict[str, Any], rnd: Any) -> None:
    items = list(args.items())
    rnd.shuffle(items)
    assert canonical_args(dict(items)) == canonical_args(args)


@given(_args)
def test_idempotent_and_valid_json(args: dict[str, Any]) -> None:
    once = canonical_args(args)
    assert canonical_args(json.loads(once)) == once
    assert canonical_args(once) == once  # a JSON string is parsed, not quoted
    assert once == json.dumps(
        json.loads(once), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )


@given(st.integers(-(10**9), 10**9))
def test_integral_floats_equal_ints(n: int) -> None:
    assert canonical_args({"n": float(n)}) == canonical_args({"n": n})
