"""Token counting for recall excerpts.

Uses the exact o200k_base counter from ``personae.tokens`` when that package
provides it; otherwise a deliberately conservative estimate (ASCII chars / 3,
every other character one token), which over-counts technical Markdown and
JSON rather than under-counting them.
"""

from __future__ import annotations

import importlib
import math
import threading
from collections.abc import Callable
from functools import cache

__all__ = ["count_tokens", "counter_name", "warm_up"]


@cache
def _counter() -> tuple[str, Callable[[str], int]]:
    try:
        module = importlib.import_module("personae.tokens.exact")
        counter = module.exact_counter("o200k_base")
        return str(counter.name), counter.count
    except Exception:
        return "estimate:conservative", _estimate


def _estimate(text: str) -> int:
    ascii_chars = sum(1 for ch in text if ord(ch) < 128)
    return math.ceil(ascii_chars / 3) + (len(text) - ascii_chars)


def count_tokens(text: str) -> int:
    """Tokens in ``text`` (exact when available, else a conservative estimate)."""
    return _counter()[1](text)


def warm_up() -> None:
    """Load the tokenizer in a background thread (the first load takes seconds)."""
    threading.Thread(target=_counter, name="personae-tokens-warm-up", daemon=True).start()


def counter_name() -> str:
    """Name of the counter in use."""
    return _counter()[0]
