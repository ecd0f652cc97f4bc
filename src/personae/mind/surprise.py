"""Surprise: how far a tool result departs from what the journal predicted.

The prediction is mechanical: the results recorded earlier for the same tool
called with similar arguments (word-bag cosine of the arguments at least
:data:`SIMILAR_ARGS`). The score is 1 minus the best cosine similarity between
the new result and those results, raised to at least :data:`HIGH_SURPRISE`
when the outcome flips between success and failure. No earlier result with
similar arguments means no prediction: the score is ``None``, not zero.
Pure functions; no model involved.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["HIGH_SURPRISE", "SIMILAR_ARGS", "Surprise", "score_surprise"]

HIGH_SURPRISE = 0.7
"""Above this, stop and surface the result to the user before continuing."""
SIMILAR_ARGS = 0.5
"""Earlier calls whose arguments are at least this similar form the prediction."""
_BASIS = 3
_TEXT_CHARS = 20_000
_WORD = re.compile(r"\w+", re.UNICODE)
_FAILED = re.compile(r"(?i)\b(traceback|exception|error|failed|failure|permission denied)\b")


@dataclass(frozen=True)
class Surprise:
    """A surprise score and what it was measured against."""

    score: float | None
    """0 (as predicted) to 1 (nothing like it); ``None`` when nothing predicted it."""
    basis: int
    """How many earlier results formed the prediction."""


def _bag(text: str) -> Counter[str]:
    return Counter(w.lower() for w in _WORD.findall(text[:_TEXT_CHARS]))


def _cosine(a: Counter[str], b: Counter[str]) -> float:
    if not a and not b:
        return 1.0
    if not a or not b:
        return 0.0
    dot = sum(count * b[word] for word, count in a.items() if word in b)
    return dot / math.sqrt(sum(v * v for v in a.values()) * sum(v * v for v in b.values()))


def _failed(text: str) -> bool:
    return _FAILED.search(text[:4000]) is not None


def score_surprise(args: str, result: str, earlier: Sequence[tuple[str, str]]) -> Surprise:
    """Score ``result`` of a call with ``args`` against ``earlier`` (args, result) pairs of
    the same tool, newest first."""
    wanted = _bag(args)
    ranked = sorted(
        ((_cosine(wanted, _bag(a)), r) for a, r in earlier),
        key=lambda pair: -pair[0],
    )
    predicted = [r for similarity, r in ranked[:_BASIS] if similarity >= SIMILAR_ARGS]
    if not predicted:
        return Surprise(None, 0)
    got = _bag(result)
    score = 1.0 - max(_cosine(got, _bag(p)) for p in predicted)
    if all(_failed(p) != _failed(result) for p in predicted):
        score = max(score, HIGH_SURPRISE + 0.1)  # it failed where it worked, or the reverse
    return Surprise(round(min(1.0, max(0.0, score)), 3), len(predicted))
