"""The bounded least-recently-used memos of the context engine (counts, file reads).

An ``OrderedDict`` kept in use order: :func:`recall` marks a hit as recently
used, :func:`remember` stores a value and drops the least recently used entry
once the memo holds more than its limit. Safe to share between threads in the
sense the memos need: a key another thread evicts at the same moment is only a
miss, never an error.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, TypeVar

__all__ = ["IdentityMemo", "SizedMemo", "hold", "recall", "remember"]

K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")


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


def hold(memo: dict[K, V], key: K, value: V, limit: int) -> V:
    """Store ``value`` for ``key`` in a memo that is emptied once it holds ``limit``
    entries, and return it: for memos read on every prompt whose keys rarely vary (a
    plain ``dict.get`` per hit, no use order kept)."""
    if len(memo) >= limit:
        memo.clear()
    memo[key] = value
    return value


class SizedMemo(Generic[K, V]):
    """A least-recently-used memo bounded by the total size of what it holds (the
    caller says each value's size, e.g. its characters), not by its entry count."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self.memo: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: K) -> V | None:
        """The value for ``key`` (now the most recently used), or ``None``."""
        got = recall(self.memo, key)
        return None if got is None else got[0]

    def put(self, key: K, value: V, size: int) -> None:
        """Store ``value``; drop the least recently used while over the limit."""
        if size > self.limit:
            return
        with self.lock:
            old = self.memo.get(key)
            if old is not None:
                self.size -= old[1]
            remember(self.memo, key, (value, size), 1 << 62)
            self.size += size
            while self.size > self.limit and self.memo:
                _, (_, dropped) = self.memo.popitem(last=False)
                self.size -= dropped


class IdentityMemo(Generic[T, V]):
    """Values by object identity, each object kept alive with its value (so its id is
    not reused while it is held); emptied when full, since the objects asked for again
    are the latest ones (the prompts just built)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held: dict[int, tuple[T, V]] = {}

    def get(self, obj: T) -> V | None:
        """The value held for this very object, or ``None``."""
        got = self.held.get(id(obj))
        return got[1] if got is not None and got[0] is obj else None

    def put(self, obj: T, value: V) -> None:
        """Hold ``value`` for ``obj`` (and ``obj`` with it)."""
        if len(self.held) >= self.limit:
            self.held.clear()
        self.held[id(obj)] = (obj, value)
