"""Token budgets: an absolute number of tokens, or a share of a model's window."""

from __future__ import annotations

from dataclasses import dataclass

from personae.errors import UsageError
from personae.limits import DEFAULTS

__all__ = ["DEFAULT_SHARE", "Budget"]

DEFAULT_SHARE = DEFAULTS.budget_share
"""Assembled context may use at most this share of the model's window (the rest is left to
the conversation and the answer)."""


@dataclass(frozen=True, slots=True)
class Budget:
    """How many tokens the rendered context may take."""

    tokens: int
    """The limit on the exact token count of the rendered context."""
    window: int | None = None
    """The model's context window, when the budget was derived from it."""
    share: float | None = None
    """The share of ``window`` used, when the budget was derived from it."""

    def __post_init__(self) -> None:
        if self.tokens < 1:
            raise UsageError(f"budget must be at least 1 token (got {self.tokens})", field="budget")

    @classmethod
    def absolute(cls, tokens: int, *, window: int | None = None) -> Budget:
        """A fixed number of tokens (``window`` only for percentages in the report)."""
        return cls(tokens=tokens, window=window)

    @classmethod
    def of_window(cls, window: int, share: float = DEFAULT_SHARE) -> Budget:
        """``share`` (default 30%) of a model's context window."""
        if window < 1:
            raise UsageError(f"window must be at least 1 token (got {window})", field="window")
        if not 0 < share <= 1:
            raise UsageError(f"share must be in (0, 1] (got {share})", field="share")
        return cls(tokens=max(1, int(window * share)), window=window, share=share)

    def describe(self) -> str:
        """``12,000 tokens (30% of 40,000)`` or ``12,000 tokens``."""
        if self.window and self.share is not None:
            return f"{self.tokens:,} tokens ({self.share:.0%} of {self.window:,} window)"
        return f"{self.tokens:,} tokens"
