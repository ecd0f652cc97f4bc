"""In-process windows: what earlier turns of a session already prepared, reused.

An agent loop appends a few messages per turn. The snapshot's message digest
and each message's escaped form and rendered cost are kept per session (a
small LRU of windows), so a turn prepares only what is new: the old part is
checked by identity (in-memory lists), or by seq, role and content (fresh rows
from the store), and regrouped only from its last exchange on.
"""

from __future__ import annotations

import contextlib
import hashlib
import operator
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from personae.context.history import Exchanges, MessageCosts, render_unit
from personae.context.messages import ChatMessage, Unit, group_units_at

__all__: list[str] = []

_MAX_WINDOWS = 32


def _same(a: ChatMessage, b: ChatMessage) -> bool:
    return a is b or (
        a.seq == b.seq
        and a.role == b.role
        and a.tool_call_id == b.tool_call_id
        and a.content == b.content
        and a.tool_calls == b.tool_calls
    )


def common_prefix(old: Sequence[ChatMessage], new: Sequence[ChatMessage]) -> int:
    """How many leading messages ``old`` and ``new`` share."""
    n = min(len(old), len(new))
    # C-speed: tuple equality checks identity first, so the same messages compare in a
    # plain loop of pointer tests (equal messages that are not the same objects also pass).
    if tuple(old[:n]) == tuple(new[:n]):
        return n
    for i in range(n):
        if not _same(old[i], new[i]):
            return i
    return n


def _feed(state: Any, m: ChatMessage) -> None:
    state.update(f"\x00{m.seq}\x00{m.role}\x00{m.tool_call_id}\x00".encode())
    for c in m.tool_calls:
        state.update(f"{c.id}\x01{c.name}\x01{c.arguments}\x01".encode())
    state.update(m.content.encode("utf-8", "surrogatepass"))


@dataclass
class _Digest:
    msgs: list[ChatMessage] = field(default_factory=list)
    state: Any = field(default_factory=hashlib.sha256)


_DIGESTS: OrderedDict[Hashable, _Digest] = OrderedDict()


def _lru(cache: OrderedDict[Hashable, Any], key: Hashable, make: Any) -> Any:
    got = cache.get(key)
    if got is None:
        got = make()
        cache[key] = got
        if len(cache) > _MAX_WINDOWS:
            cache.popitem(last=False)
    else:
        cache.move_to_end(key)
    return got


def messages_digest(key: Hashable, messages: Sequence[ChatMessage]) -> bytes:
    """SHA-256 over the messages (same as hashing them all), reusing the session's prefix."""
    win: _Digest = _lru(_DIGESTS, key, _Digest)
    k = common_prefix(win.msgs, messages)
    if k < len(win.msgs):
        win.msgs, win.state = [], hashlib.sha256()
        k = 0
    for m in messages[k:]:
        _feed(win.state, m)
    win.msgs.extend(messages[k:])
    return win.state.copy().digest()  # type: ignore[no-any-return]


@dataclass
class _Prepared:
    msgs: list[ChatMessage] = field(default_factory=list)
    prepared: list[tuple[ChatMessage, int]] = field(default_factory=list)
    units: list[Unit] = field(default_factory=list)
    costs: list[tuple[int, ...]] = field(default_factory=list)
    blocks: list[str] = field(default_factory=list)
    heads: list[int] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    before: list[int] = field(default_factory=list)
    dropped: int = 0
    cum_cost: list[int] = field(default_factory=lambda: [0])
    cum_msgs: list[int] = field(default_factory=lambda: [0])

    def pop_last(self) -> tuple[Unit, str] | None:
        """Take the last exchange off (it may still grow) and return it with its block."""
        if not self.units:
            return None
        got = self.units.pop(), self.blocks.pop()
        del self.costs[-1], self.heads[-1], self.starts[-1], self.before[-1]
        del self.cum_cost[-1], self.cum_msgs[-1]
        return got


_PREPARED: OrderedDict[Hashable, _Prepared] = OrderedDict()


def _block(unit: Unit, previous: tuple[Unit, str] | None) -> str:
    """The unit rendered, reusing the previous rendering of the same messages."""
    if previous is not None:
        old = previous[0].messages
        if len(old) == len(unit.messages) and all(map(operator.is_, old, unit.messages)):
            return previous[1]
    return render_unit(unit)


def prepared_units(
    key: Hashable, messages: Sequence[ChatMessage], costs_of: MessageCosts
) -> tuple[Exchanges, int]:
    """Escaped exchanges prepared for fitting and the dropped count, reusing the
    session's prefix."""
    full_key = (key, costs_of.counter.name, costs_of.tags)
    win: _Prepared = _lru(_PREPARED, full_key, _Prepared)
    k = common_prefix(win.msgs, messages)
    if k < len(win.msgs):
        win = _Prepared()
        _PREPARED[full_key] = win
        k = 0
    win.prepared.extend(costs_of.prepare(m) for m in messages[k:])
    win.msgs.extend(messages[k:])
    # Exchanges before the last one are final; regroup from the last one's head.
    restart = win.starts[-1] if win.units else 0
    base = win.before[-1] if win.units else 0
    previous = win.pop_last()
    sep = costs_of.sep
    tail = [p[0] for p in win.prepared[restart:]]
    units, dropped, starts, before = group_units_at(tail)
    cost_by_msg = {id(p[0]): p[1] for p in win.prepared[restart:]}
    for u, s, b in zip(units, starts, before, strict=True):
        win.units.append(u)
        win.costs.append(
            tuple(
                cost_by_msg[id(m)] if id(m) in cost_by_msg else costs_of.prepare(m)[1]
                for m in u.messages
            )
        )
        win.blocks.append(_block(u, previous))
        win.heads.append(u.head.seq)
        win.starts.append(restart + s)
        win.before.append(base + b)
        win.cum_cost.append(win.cum_cost[-1] + sum(win.costs[-1]) + sep * len(u.messages))
        win.cum_msgs.append(win.cum_msgs[-1] + len(u.messages))
    win.dropped = base + dropped
    ex = Exchanges(
        tuple(win.units),
        tuple(win.costs),
        tuple(win.cum_cost),
        tuple(win.cum_msgs),
        tuple(win.blocks),
        sep,
        tuple(win.heads),
    )
    return ex, win.dropped


_HINTS: OrderedDict[Hashable, tuple[str, int | None, int | None]] = OrderedDict()


def kept_from(key: Hashable, snapshot_id: str) -> int | None:
    """Seq of the first message the previous prompt under ``key`` kept (``None``: none).

    The same snapshot assembled again gets the hint its first assembly got, so
    repeating an assembly repeats its output byte for byte.
    """
    got = _HINTS.get(key)
    if got is None:
        return None
    return got[1] if got[0] == snapshot_id else got[2]


def remember_kept_from(key: Hashable, snapshot_id: str, used: int | None, seq: int | None) -> None:
    """Record the hint ``used`` for ``snapshot_id`` and the first message it kept."""
    _HINTS[key] = (snapshot_id, used, seq)
    with contextlib.suppress(KeyError):  # another thread may have evicted it just now
        _HINTS.move_to_end(key)
    if len(_HINTS) > _MAX_WINDOWS * 8:
        with contextlib.suppress(KeyError):
            _HINTS.popitem(last=False)
