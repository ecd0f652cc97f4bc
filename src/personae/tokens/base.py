"""The token counter protocol every part of personae counts with."""

from __future__ import annotations

from typing import ClassVar, Protocol, runtime_checkable

__all__ = ["CounterBase", "TokenCounter"]


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


class CounterBase:
    """What the counters share: a name, whether counts are exact, a calibration factor.

    ``name`` and ``exact`` are attributes set once, not properties: the context engine
    reads them at every count it looks up (about twenty times a prompt)."""

    __slots__ = {
        "_factor": "Calibration factor (see :attr:`factor`).",
        "exact": "True when counts are the tokenizer's own (not an estimate).",
        "name": "Counter name shown in reports: the encoding (``o200k_base``), or"
        " ``estimate:<family>`` plus ``@x<factor>`` when calibrated.",
    }

    EXACT: ClassVar[bool] = False
    """True for counters that run the tokenizer itself."""

    name: str
    exact: bool

    def __init__(self, name: str, factor: float = 1.0) -> None:
        self.name = name
        self.exact = self.EXACT
        self._factor = factor

    def __setattr__(self, attr: str, value: object) -> None:
        """Set an attribute; ``name`` and ``exact`` only once (by the constructor, or
        when a copy or an unpickled counter is filled in)."""
        if attr in ("name", "exact") and hasattr(self, attr):
            raise AttributeError(f"{type(self).__name__}.{attr} cannot be changed")
        object.__setattr__(self, attr, value)

    @property
    def factor(self) -> float:
        """Calibration factor applied to estimates (1.0: uncalibrated; exact counts are
        never calibrated)."""
        return self._factor
