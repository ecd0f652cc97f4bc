"""One input-token figure per model call, and the drift of our own count from it.

Each stored call's usage holds the provider's reported ``input_tokens`` and ours
(``counted_input_tokens``: every message, tool definition and the chat framing of the
request, by the model's counter). The figure is the provider's when it reported one,
else ours; the drift is how far ours is from the provider's, in percent of it. The
budget report's total is a third number only in appearance: it is the assembled
context, one part of the request (``runs show`` and the viewer label it so).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["InputCount", "input_count"]


@dataclass(frozen=True, slots=True)
class InputCount:
    """The input tokens of one call: one figure, where it came from, and ours beside it."""

    reported: int | None
    """The provider's reported input tokens (``None``: it reported none)."""
    ours: int | None
    """Our count of the whole request (``None``: stored before we counted requests)."""
    counter: str | None = None
    """The counter that made ours."""
    exact: bool = False
    """Whether ours is an exact tokenizer count."""

    @property
    def figure(self) -> int | None:
        """The one figure shown: the provider's, else ours."""
        return self.reported if self.reported is not None else self.ours

    @property
    def drift(self) -> float | None:
        """``(ours - provider) / provider`` in percent (``None``: one of them is missing)."""
        if self.reported is None or self.ours is None:
            return None
        return 100.0 * (self.ours - self.reported) / self.reported

    def text(self) -> str:
        """``1,234 (provider; ours +5.4%, estimate:generic)``, ``… o200k_base exact)``, or
        ours alone when the provider reported none."""
        name = self.counter or "?"
        how = f"{name} exact" if self.exact else (
            name if name.startswith("estimate") else f"{name} estimate")  # fmt: skip
        if self.reported is None:
            if self.ours is None:
                return "not reported, not counted"
            return f"{self.ours:,} (ours, {how}; the provider reported none)"
        if self.drift is None:
            return f"{self.reported:,} (provider; ours not recorded)"
        return f"{self.reported:,} (provider; ours {self.drift:+.1f}%, {how})"

    def short(self) -> str:
        """``1,234 in (ours +5.4%)``: the figure and the drift only."""
        if self.figure is None:
            return "- in"
        if self.reported is None:
            return f"{self.figure:,} in (ours; none reported)"
        drift = self.drift
        return f"{self.figure:,} in" + (f" (ours {drift:+.1f}%)" if drift is not None else "")


def input_count(usage: Mapping[str, Any]) -> InputCount:
    """The input count of a stored call's ``usage``. A reported 0 is no report, and so is
    a call marked ``reported: false`` (a stream that ended without usage, whose
    ``input_tokens`` are ours)."""
    reported = usage.get("input_tokens") if usage.get("reported") is not False else None
    ours = usage.get("counted_input_tokens")
    counter = usage.get("counter")
    return InputCount(
        reported=reported if isinstance(reported, int) and reported > 0 else None,
        ours=ours if isinstance(ours, int) and ours > 0 else None,
        counter=counter if isinstance(counter, str) else None,
        exact=bool(usage.get("counter_exact")),
    )
