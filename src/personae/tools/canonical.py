"""Canonical JSON of tool arguments, so equal calls compare equal (loop detection)."""

from __future__ import annotations

import json
import math
import unicodedata
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from pydantic import BaseModel

__all__ = ["canonical_args"]


def canonical_args(args: Any) -> str:
    """Deterministic JSON for ``args``.

    Rules: keys sorted, no insignificant whitespace, non-ASCII kept; numbers
    normalized (``1.0`` and ``1`` are the same, ``-0.0`` is ``0``, NaN and
    infinities become strings); strings NFC-normalized with ``\\r\\n`` turned
    into ``\\n`` and surrounding whitespace stripped; keys whose value is
    ``None`` dropped (an omitted optional argument equals an explicit null);
    tuples are lists; sets are sorted; pydantic models are dumped. ``None`` at
    the top level is ``{}``, and a top-level string holding a JSON object
    (a model's raw tool-call arguments) is parsed first.

    Raises:
        TypeError: a value JSON cannot represent (an arbitrary object).
    """
    if args is None:
        args = {}
    elif isinstance(args, str | bytes):
        try:
            parsed = json.loads(args)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            args = parsed
    return _dump(_norm(args))


def _dump(value: Any) -> str:
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def _number(value: float) -> int | float | str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value.is_integer():
        return int(value)
    return value


def _text(value: str) -> str:
    return unicodedata.normalize("NFC", value.replace("\r\n", "\n")).strip()


def _norm(value: Any) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, Decimal):
        return _number(float(value)) if value.is_finite() else _number(float(str(value)))
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, bytes):
        return _text(value.decode("utf-8", errors="replace"))
    if isinstance(value, BaseModel):
        return _norm(value.model_dump(mode="json"))
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key in sorted(value, key=str):
            item = value[key]
            if item is None:
                continue
            out[_text(str(key)) if isinstance(key, str) else str(_norm(key))] = _norm(item)
        return out
    if isinstance(value, list | tuple):
        return [_norm(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((_norm(v) for v in value), key=_dump)
    raise TypeError(f"cannot canonicalize a {type(value).__name__}")
