"""What model calls cost: the project's price table (``prices:`` in ``.personae/config.yaml``).

Prices are per million tokens, input and output apart, in whatever currency the
table is written in. A model without a price has an unknown cost: personae never
invents a figure, so a tree with one unpriced call has an unknown total (and the
priced part is still shown as such). This module imports nothing of personae.

>>> table = PriceTable({"openai:gpt-4o": Price(input=2.5, output=10.0)})
>>> table.cost("openai:gpt-4o", 1_000_000, 100_000)
3.5
>>> table.cost("gpt-4o", 1000, 0), table.cost("ollama:qwen3", 1000, 10) is None
(0.0025, True)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["Price", "PriceTable", "TreeCost"]


@dataclass(frozen=True, kw_only=True)
class Price:
    """The price of one model, per million tokens."""

    input: float
    """Per million input tokens."""
    output: float
    """Per million output tokens."""


class PriceTable:
    """Prices by model: a ``provider:name`` label, or a bare name matching any provider."""

    def __init__(self, prices: Mapping[str, Price] | None = None) -> None:
        self.prices: dict[str, Price] = dict(prices or {})

    def __bool__(self) -> bool:
        return bool(self.prices)

    def price_for(self, model: str) -> Price | None:
        """The price of ``model`` (its full label first, then its name without provider)."""
        if model in self.prices:
            return self.prices[model]
        _, sep, name = model.partition(":")
        return self.prices.get(name) if sep else None

    def cost(self, model: str, input_tokens: int, output_tokens: int) -> float | None:
        """What ``input_tokens`` in and ``output_tokens`` out of ``model`` cost (``None``:
        no price for it)."""
        price = self.price_for(model)
        if price is None:
            return None
        return round((input_tokens * price.input + output_tokens * price.output) / 1e6, 9)


@dataclass(frozen=True, kw_only=True)
class TreeCost:
    """A summed cost: the priced part, and the models that had no price."""

    priced: float = 0.0
    """What the priced calls cost."""
    unpriced: tuple[str, ...] = ()
    """Models whose calls have no price (then the total is unknown)."""

    @property
    def total(self) -> float | None:
        """The whole cost (``None``: unknown, some call had no price)."""
        return None if self.unpriced else round(self.priced, 9)

    @classmethod
    def of(cls, table: PriceTable, calls: Iterable[tuple[str, int, int]]) -> TreeCost:
        """The cost of ``calls`` (model, input tokens, output tokens)."""
        priced, unpriced = 0.0, dict[str, None]()
        for model, inp, out in calls:
            cost = table.cost(model, inp, out)
            if cost is None:
                unpriced[model] = None
            else:
                priced += cost
        return cls(priced=round(priced, 9), unpriced=tuple(unpriced))

    def __add__(self, other: TreeCost) -> TreeCost:
        return TreeCost(
            priced=round(self.priced + other.priced, 9),
            unpriced=tuple(dict.fromkeys((*self.unpriced, *other.unpriced))),
        )
