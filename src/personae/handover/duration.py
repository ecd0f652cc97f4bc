"""Durations on the command line: ``300s``, ``300000ms``, ``5m``, ``1h``, or a bare number.

Callers of ``--handover-timeout`` pass milliseconds (default 300000); personae's own
flags were seconds. A value with a unit means what it says; a bare number uses the
unit the flag documents (``bare``).
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Literal

from personae.errors import UsageError

__all__ = ["DURATION_UNITS", "format_seconds", "parse_duration"]

DURATION_UNITS: dict[str, float] = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
"""Accepted units and their length in seconds."""

_DURATION = re.compile(r"^\s*(?P<num>\d+(?:\.\d+)?|\.\d+)\s*(?P<unit>ms|s|m|h)?\s*$")


def parse_duration(text: str, *, bare: Literal["ms", "s"], flag: str = "duration") -> float:
    """Seconds for ``text``; a bare number is in ``bare`` units.

    Raises :class:`UsageError` naming ``flag`` for anything else (no sign, no
    zero, no other unit).
    """
    match = _DURATION.match(text)
    if match is None:
        raise UsageError(
            f"bad duration {text!r}: use a number with a unit (300s, 300000ms, 5m, 1h); "
            f"a bare number is {'milliseconds' if bare == 'ms' else 'seconds'}",
            field=flag,
        )
    seconds = float(match.group("num")) * DURATION_UNITS[match.group("unit") or bare]
    if seconds <= 0 or not math.isfinite(seconds):
        raise UsageError(f"bad duration {text!r}: must be more than zero", field=flag)
    return seconds


def format_seconds(seconds: float) -> str:
    """``12`` -> ``"12s"``; ``0.25`` -> ``"250ms"``: a form :func:`parse_duration` reads back.

    Plain digits whatever the size (never ``1e+06``, which the parser refuses), with the
    shortest decimal that gives back the same milliseconds.
    """
    if seconds >= 1 and float(seconds).is_integer():
        return f"{int(seconds)}s"
    return f"{Decimal(repr(seconds * 1000)):f}ms"
