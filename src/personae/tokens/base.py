"""The token counter protocol every part of personae counts with."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["TokenCounter"]


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens of text for one tokenizer."""

    @property
    def name(self) -> str:
        """Counter name shown in reports, e.g. ``o200k_base`` or ``estimate:claude``."""
        ...

    @property
    def exact(self) -> bool:
        """True when counts are the tokenizer's own (not an estimate)."""
        ...

    def count(self, text: str) -> int:
        """Number of tokens in ``text``."""
        ...
