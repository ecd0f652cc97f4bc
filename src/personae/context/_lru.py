"""The bounded least-recently-used memos of the context engine (counts, file reads).

An ``OrderedDict`` kept in use order: :func:`recall` marks a hit as recently
used, :func:`remember` stores a value and drops the least recently used entry
once the memo holds more than its limit. Safe to share between threads in the
sense the memos need: a key another thread evicts at the same moment is only a
miss, never an error.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TypeVar

__all__ = ["recall", "remember"]

K = TypeVar("K")
V = TypeVar("V")


def recall(memo: OrderedDict[K, V], key: K) -> V | None:
    """The value remembered for ``key`` (now the most recently used), or ``None``."""
    value = memo.get(key)
    if value is not None:
        try:  # noqa: SIM105 (suppress() costs a context manager on every hit)
            memo.move_to_end(key)
        except KeyError:  # another thread evicted it just now
            pass
    return value


def remember(memo: OrderedDict[K, V], key: K, value: V, limit: int) -> None:
    """Store ``value`` for ``key`` as the most recently used; keep at most ``limit``."""
    memo[key] = value
    try:  # noqa: SIM105 (a replaced key keeps its place unless moved)
        memo.move_to_end(key)
    except KeyError:  # another thread evicted it just now
        pass
    if len(memo) > limit:
        try:  # noqa: SIM105
            memo.popitem(last=False)
        except KeyError:  # another thread emptied it just now
            pass
